"""A sweep's temp folders are removed by a later sweep once the process that made them is gone,
and only then: a running sweep's, a folder without the marker and anything else stay."""
import os
import signal
import subprocess
import sys

import pytest

from sweeper import tempfolders
from tests.conftest import checkout_first

HOLDER = """
import sys, time
from sweeper.tempfolders import held_folder
print(held_folder(sys.argv[1]), flush=True)
time.sleep(3600)
"""


def start_holder(tmp_path, prefix):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": checkout_first()}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, prefix], env=env, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


@pytest.mark.slow
def test_a_folder_is_removed_once_its_process_is_killed_and_not_before(tmp_path):
    (tmp_path / "sweeper-node-older").mkdir()                 # no marker: an older sweeper's, say
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / tempfolders.MARKER).touch()         # a marker, but not a sweep's name
    proc, held = start_holder(tmp_path, "sweeper-scratch-")
    try:
        (tmp_path / held / "sweeper-t1-x").mkdir()           # a trial's scratch inside
        assert tempfolders.clear_abandoned(str(tmp_path)) == 0
        assert os.path.isdir(held)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert tempfolders.clear_abandoned(str(tmp_path)) == 1
        assert sorted(os.listdir(tmp_path)) == ["other", "sweeper-node-older"]
    finally:
        proc.kill()
        proc.wait()


def test_this_process_keeps_its_own_until_it_removes_it(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    held = tempfolders.held_folder("sweeper-node-")
    assert held.parent == tmp_path and (held / tempfolders.MARKER).is_file()
    assert tempfolders.clear_abandoned() == 0 and held.is_dir()
    tempfolders.remove(held)
    assert not held.exists() and str(held) not in tempfolders._HELD
