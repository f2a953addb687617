"""Checks of the machine before any trial: folders the run will write, CPUs its loaders ask for."""
import dataclasses
import os

import pytest

from sweeper.errors import ConfigError
from sweeper.plan import ClusterShape, plan_cells
from sweeper.preflight import (check_history_dir, check_machine, check_temp_room, folder_problem, in_process_line,
                               loader_workers_line)
from sweeper.schema import root_config_from_dict

TWO_CPUS = ClusterShape(node_cpus=[2.0], node_gpus=[0.0])


def root(**values):
    return root_config_from_dict(values)


def test_history_dir_that_is_a_file_is_refused_before_any_trial(tmp_path):
    (tmp_path / "hist").write_text("x")
    with pytest.raises(ConfigError, match=r"^history\.dir: .*hist is a file, not a folder; set history\.dir="):
        check_history_dir(root(history={"dir": str(tmp_path / "hist")}))
    with pytest.raises(ConfigError, match=r"^history\.dir: .*hist \(above .*\) is a file"):
        check_history_dir(root(history={"dir": str(tmp_path / "hist" / "deeper")}))
    check_history_dir(root(history={"dir": str(tmp_path / "hist"), "enabled": False}))   # not appended: no matter


def test_a_new_history_dir_passes_and_is_not_created_by_the_check(tmp_path):
    check_history_dir(root(history={"dir": str(tmp_path / "new" / "history")}))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_folder_this_user_cannot_write(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert folder_problem(locked / "history") == f"{locked} cannot be written by this user"


def test_more_loader_workers_than_cpus_is_one_warning_line(capsys):
    loader = {"target": "workloads.dataloader:run", "spec": "workloads.specs:DATALOADER"}
    jobs = [([f"data.num_workers={n}"], root(workload=loader, data={"num_workers": n})) for n in (1, 4, 8)]
    trials = plan_cells(jobs, TWO_CPUS)
    assert loader_workers_line(trials, TWO_CPUS).startswith(
        "data.num_workers=4,8: more loader workers than this node's 2 CPUs")
    assert loader_workers_line(trials[:1], TWO_CPUS) is None
    check_machine(root(executor="local", history={"enabled": False}), trials, TWO_CPUS)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: data.num_workers=4,8")


@pytest.mark.parametrize("values, key", [
    ({"data": {"num_workers": 100000}}, "data.num_workers"),
    ({"data": {"dali": {"num_threads": 5000}}}, "data.dali.num_threads"),
])
def test_an_absurd_number_of_workers_is_refused(values, key):
    with pytest.raises(ConfigError, match=rf"^{key}: \d+ .* more than a node runs \(at most 1024\)"):
        root_config_from_dict(values)


def test_two_deepspeed_trials_in_the_drivers_own_process_are_refused_before_any_trial():
    """executor=local: DeepSpeed keeps the first trial's process group, and every later DeepSpeed
    trial failed ('Group ... is not registered'); one such trial, or native ones, run."""
    step = {"target": "workloads.train_step:run", "spec": "workloads.specs:TRAIN_STEP", "device": "cpu"}
    jobs = [([f"train.zero_stage={z}"], root(workload=step, train={"zero_stage": z})) for z in (0, 1)]
    native = plan_cells(jobs, TWO_CPUS)
    deepspeed = [dataclasses.replace(t, config=dataclasses.replace(
        t.config, train=dataclasses.replace(t.config.train, backend="deepspeed"))) for t in native]
    assert in_process_line(native) is None and in_process_line(deepspeed[:1]) is None
    with pytest.raises(ConfigError, match=r"^executor=local: 2 trials with train\.backend=deepspeed would run in this "
                                          r"one process, .*leave executor out"):
        check_machine(root(executor="local", history={"enabled": False}), deepspeed, TWO_CPUS)
    check_machine(root(executor="ray", history={"enabled": False}), deepspeed, TWO_CPUS)   # a process each


def test_a_local_rays_temp_folder_that_cannot_be_written_is_said_so_not_as_a_full_disk(monkeypatch):
    """/proc reads 0 B free: the line said "0 B free; free space". Ray, unlike Python's tempfile,
    takes no other folder, so only a sweep that starts a local Ray is refused."""
    monkeypatch.setenv("RAY_TMPDIR", "/proc/sys")
    with pytest.raises(ConfigError) as refused:
        check_temp_room("ray", None)
    assert str(refused.value).startswith("RAY_TMPDIR=/proc/sys: /proc/sys cannot be written by this user")
    check_temp_room("ray", "10.0.0.1:6379")          # an attached cluster's sessions are on its own nodes
    check_temp_room("local", None)
