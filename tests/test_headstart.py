"""The node zygote started with the command, before Hydra composes: which command lines start it
(argv alone), the Ray executor adopting it, and every other path ending it."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest
from omegaconf import OmegaConf

from sweeper import executors, timeline
from sweeper import nodezygote
from sweeper.headstart import may_run_on_local_ray
from sweeper.schema.run import RayConfig
from tests.conftest import ROOT, checkout_first


@pytest.mark.parametrize("args", [
    [], ["workload.steps=5"], ["-m", "workload.seed=0,1"], ["--multirun", "resume=latest"], ["+sweep=dataloader"],
    ["executor=ray"], ["dry_run=false"], ["+dry_run=False"], ["ray.num_cpus=2"], ["ray.address=null"],
    ["--config-dir", "/somewhere", "+sweep=mine"], ["-cn=config", "repeats=2"],
])
def test_a_command_line_that_may_sweep_on_a_local_ray_starts_the_zygote(args):
    assert may_run_on_local_ray(args)


@pytest.mark.parametrize("args", [
    ["--help"], ["-h"], ["--hydra-help"], ["--version"], ["--cfg", "job"], ["-c", "job"], ["--info"], ["-i", "all"],
    ["--shell-completion", "install=bash"], ["-sc", "query=bash"], ["--cfg", "job", "--package", "data"],
    ["--multi"],                                                      # an abbreviation argparse takes: unread here
    ["dry_run=true"], ["+dry_run=True"], ["dry_run=yes"], ["dry_run=true,false"], ["workload.seed=1", "dry_run=1"],
    ["executor=local"], ["executor=local,ray"], ["ray.address=auto"], ["++ray.address=ray://h:10001"],
    ["+ray.runtime_env={env_vars:{A:'1'}}"], ["+ray.runtime_env.env_vars.A=1"], ["ray={address:auto}"],
    ["+sweep=overnight"], ["sweep=overnight"], ["overnight.sweeps=[dataloader]"], ["+overnight.budget_s=60"],
    ["hydra/launcher=basic"], ["~dry_run"], ["stray"],
])
def test_help_info_a_dry_run_another_executor_a_cluster_or_a_suite_starts_none(args):
    assert not may_run_on_local_ray(args)


def test_a_cluster_named_by_ray_address_starts_none_unless_the_command_line_asks_for_a_local_ray(monkeypatch):
    """RAY_ADDRESS is ray.address's default (conf/config.yaml), as ray.init() reads it: a sweep then
    attaches there, and a zygote started here would be ended unused."""
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert not may_run_on_local_ray(["workload.steps=5"])
    assert may_run_on_local_ray(["workload.steps=5", "ray.address=null"])
    monkeypatch.setenv("RAY_ADDRESS", "")                 # as Ray reads it: not set
    assert may_run_on_local_ray(["workload.steps=5"])


def test_ray_address_defaults_to_ray_address_where_it_names_a_cluster(monkeypatch):
    from hydra import compose, initialize_config_dir

    from sweeper.config import register_configs
    from sweeper.schema import root_config_from_dict

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        for value, expected in (("10.0.0.1:6379", "10.0.0.1:6379"), ("", None), (None, None)):
            if value is None:
                monkeypatch.delenv("RAY_ADDRESS", raising=False)
            else:
                monkeypatch.setenv("RAY_ADDRESS", value)
            for overrides, wanted in (([], expected), (["ray.address=null"], None)):
                cfg = compose("config", overrides=overrides)
                root = root_config_from_dict(OmegaConf.to_container(cfg, resolve=True))
                assert root.ray.address == wanted, (value, overrides)


class Spare:
    """Stands in for a NodeZygote: records what is done to it."""

    def __init__(self, alive=True):
        self.is_alive, self.calls = alive, []

    def alive(self):
        return self.is_alive

    def preload(self, modules):
        self.calls.append(("preload", list(modules)))

    def close(self):
        self.calls.append("close")


class NoStart:
    def __init__(self, connect):
        self.connect = connect

    def start(self):
        return self


@pytest.fixture
def spare(monkeypatch):
    from sweeper.executors import ray_executor

    made = []
    monkeypatch.setattr(ray_executor, "Starter", NoStart)             # no Ray here
    monkeypatch.setattr(nodezygote, "NodeZygote", lambda preload: made.append(list(preload)) or "own")
    found = Spare()
    monkeypatch.setattr(nodezygote, "_SPARE", found)
    return found, made


def test_a_local_ray_executor_adopts_the_spare_and_sends_it_the_workloads_modules(spare):
    from sweeper.executors.ray_executor import RayExecutor

    found, made = spare
    executor = RayExecutor(RayConfig(), ["workloads.dataloader"])
    executor.begin()
    assert executor.zygote is found and made == []
    assert found.calls == [("preload", ["workloads.dataloader"])] and nodezygote._SPARE is None


def test_a_dead_spare_is_closed_and_an_attached_cluster_ends_it_unused(spare, monkeypatch):
    from sweeper.executors.ray_executor import RayExecutor

    found, made = spare
    found.is_alive = False
    assert RayExecutor(RayConfig(), ["m"]).begin() is None and made == [["m"]] and found.calls == ["close"]
    again = Spare()
    monkeypatch.setattr(nodezygote, "_SPARE", again)
    executor = RayExecutor(RayConfig(address="auto"), [])
    executor.begin()
    assert executor.zygote is None and again.calls == ["close"] and nodezygote._SPARE is None


@pytest.mark.parametrize("config", [{"executor": "local"}, {"dry_run": True}, {"overnight": {"sweeps": ["x"]}}])
def test_a_sweep_a_file_keeps_off_ray_ends_the_spare_at_its_first_job(spare, config):
    found, _ = spare
    with executors.head_start():
        executors.begin_early(config)
        assert found.calls == ["close"]
    assert found.calls == ["close"]


def test_a_spare_no_executor_adopted_ends_with_the_launcher(spare):
    found, _ = spare
    with pytest.raises(RuntimeError):
        with executors.head_start():
            raise RuntimeError("a config error in a later job")
    assert found.calls == ["close"] and nodezygote._SPARE is None


@pytest.mark.slow
def test_a_config_error_found_by_hydra_ends_the_spare_and_its_folder(tmp_path):
    """Hydra refuses the key before the launcher runs: the command's own end ends the spare."""
    marks, tmp = tmp_path / "timeline", tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": checkout_first(), "TMPDIR": str(tmp), timeline.VARIABLE: str(marks),
           "RAY_TMPDIR": "/tmp/ray"}     # under tmp_path a local Ray's sockets are too deep: no spare is started
    result = subprocess.run([sys.executable, "-m", "sweeper", f"results_dir={tmp_path / 'results'}",
                             "workload.no_such_key=1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
    started = [pid for _, pid, name in timeline.read(str(marks)) if name == "zygote_started"]
    assert len(started) == 1, "no spare zygote was started"
    assert not psutil.pid_exists(started[0]) and list(tmp.glob("sweeper-node-*")) == []


A_TREE = """
import subprocess, sys, time
below = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(below.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.slow
def test_a_node_zygote_is_ended_with_every_process_below_it_before_kill_returns():
    """A stand-in for the zygote with a child of its own (as a trial's keeper is): its death signal
    would end it only after the zygote, and nothing waited for that."""
    from sweeper.containment import running

    zygote = object.__new__(nodezygote.NodeZygote)
    zygote.proc = subprocess.Popen([sys.executable, "-c", A_TREE], stdout=subprocess.PIPE, text=True)
    below = psutil.Process(int(zygote.proc.stdout.readline()))
    try:
        zygote.kill()
        assert not running(below) and zygote.proc.wait(timeout=10) == -9
    finally:                                 # what a kill that did not take left, by its own ids
        zygote.proc.kill()
        if running(below):
            below.kill()

