"""The overnight suite's lock file: held by one suite at a time, gone when the suite ends, and
never a file of the user's that a path typed by mistake names (in-process, no suite is started)."""
import json

import pytest

from sweeper.errors import ConfigError
from sweeper.suitelock import LockHeld, release_lock, take_lock

HOLDER = {"pid": 1, "host": "h", "started": "2026-12-01T00:00:00Z", "command": "python -m sweeper +sweep=overnight"}


def test_the_lock_is_held_by_one_suite_and_gone_when_it_ends(tmp_path):
    path = tmp_path / "overnight.lock"
    lock = take_lock(path, HOLDER)
    with pytest.raises(LockHeld, match="pid 1 on h"):
        take_lock(path, {**HOLDER, "pid": 2})
    release_lock(lock, path)
    assert not path.exists()
    release_lock(take_lock(path, {**HOLDER, "pid": 3}), path)     # free again


def test_a_lock_left_by_a_killed_suite_is_taken_over(tmp_path):
    path = tmp_path / "overnight.lock"
    path.write_text(json.dumps(HOLDER))                            # its holder is gone: no flock on it
    lock = take_lock(path, {**HOLDER, "pid": 2})
    assert json.loads(path.read_text())["pid"] == 2
    release_lock(lock, path)


def test_a_file_that_is_not_a_lock_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("precious")
    with pytest.raises(ConfigError, match="^overnight.lock_file: .* holds something other than a suite's lock"):
        take_lock(path, HOLDER)
    assert path.read_text() == "precious"
