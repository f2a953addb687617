"""Ships the top-level conf/ inside the wheel as sweeper/conf (the package finds it there:
sweeper/confdir.py). Everything else about the build is in pyproject.toml."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).resolve().parent / "conf"


class BuildPyWithConf(build_py):
    """build_py, then conf/**/*.yaml copied to <build>/sweeper/conf. An editable install skips
    the copy: the package then reads the checkout's conf/ itself."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "sweeper" / "conf"
        for source in sorted(CONF.rglob("*.yaml")):
            dest = target / source.relative_to(CONF)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)


setup(cmdclass={"build_py": BuildPyWithConf})
