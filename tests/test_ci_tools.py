""".ci/untouched.py, which says which modules of sweeper/ the fast lane leaves unexercised."""
import importlib.util

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("untouched", ROOT / ".ci" / "untouched.py")
untouched = importlib.util.module_from_spec(spec)
spec.loader.exec_module(untouched)


def test_a_module_counts_only_when_a_line_inside_one_of_its_functions_ran(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    files = {"used.py": "import os\n\ndef f():\n    return 1\n",          # line 4 ran
             "imported.py": "import os\n\ndef g():\n    return 2\n",      # only its def ran
             "constants.py": "X = 1\n",                                   # nothing to call, imported
             "never.py": "def h():\n    return 3\n"}                      # not even imported
    for name, text in files.items():
        (package / name).write_text(text)
    executed = {str((package / "used.py").resolve()): {1, 3, 4}, str((package / "imported.py").resolve()): {1, 3},
                str((package / "constants.py").resolve()): {1}}
    assert untouched.untouched(executed, package) == ["pkg/imported.py", "pkg/never.py"]
    assert untouched.body_lines(package / "used.py") == {4}
