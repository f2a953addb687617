"""CUDA's start with the command, for trials in its own process (sweeper/cudastart.py): which command
lines start it (argv alone), what it asks of the driver library (a stand-in for libcuda here; the
real one in tests/test_cudastart_gpu.py), and when the context it holds is let go."""
from __future__ import annotations

import ctypes
import threading
import time

import pytest

from sweeper import cudastart
from sweeper.headstart import may_run_in_process_on_a_gpu, may_run_on_local_ray

QUICK = ["workload.target=tests.workloads_for_tests:quick", "workload.steps=1", "workload.warmup_steps=0",
         "repeats=1", "wandb.enabled=false", "report.enabled=false", "history.enabled=false"]


@pytest.mark.parametrize("args", [
    ["executor=local"], ["executor=local", "workload.steps=5"], ["-m", "executor=local", "workload.seed=0,1"],
    ["+executor=local", "workload.device=cuda", "resources.gpus=1"], ["executor=local", "+sweep=dataloader"],
    ["executor='local'", "dry_run=false"], ["--config-dir", "/somewhere", "executor=local"],
])
def test_a_command_line_that_runs_trials_here_and_leaves_them_a_gpu_starts_cuda(args):
    assert may_run_in_process_on_a_gpu(args) and not may_run_on_local_ray(args)


@pytest.mark.parametrize("args", [
    [], ["executor=ray"], ["workload.device=cuda"], ["executor=local", "dry_run=true"],
    ["executor=local", "workload.device=cpu"], ["executor=local", "resources.gpus=0"], ["executor=local", "--help"],
    ["executor=local", "--cfg", "job"], ["executor=local,ray"], ["executor=local", "+sweep=overnight"],
    ["executor=local", "~workload.device"], ["executor=local", "hydra/launcher=basic"], ["executor=local", "stray"],
])
def test_help_a_dry_run_another_executor_a_cpu_device_or_no_gpu_starts_no_cuda(args):
    assert not may_run_in_process_on_a_gpu(args)


def test_the_gpus_counted_are_the_device_nodes_cuda_visible_devices_leaves(tmp_path, monkeypatch):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert cudastart.visible_gpus(str(tmp_path)) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cudastart.visible_gpus(str(tmp_path)) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert cudastart.visible_gpus(str(tmp_path)) == 0
    assert cudastart.visible_gpus(str(tmp_path / "none")) == 0


class Libcuda:
    """Stands in for libcuda.so.1: records the calls; `failing` names one that returns an error;
    `opened` holds cuInit until it is set."""

    def __init__(self, failing: str = ""):
        self.calls, self.failing, self.opened = [], failing, threading.Event()
        self.opened.set()

    def _call(self, name: str) -> int:
        self.calls.append(name)
        return 100 if name == self.failing else 0          # CUDA_ERROR_NO_DEVICE

    def cuInit(self, flags):
        self.opened.wait(10)
        return self._call("cuInit")

    def cuDeviceGet(self, device, ordinal):
        return self._call(f"cuDeviceGet({ordinal})")

    def cuDevicePrimaryCtxRetain(self, context, device):
        return self._call("retain")

    def cuDevicePrimaryCtxRelease_v2(self, device):
        return self._call("release")


@pytest.fixture
def libcuda(monkeypatch):
    """A fresh module state and a stand-in library; the test sets `.failing` or replaces it first."""
    monkeypatch.setattr(cudastart, "_START", None)
    monkeypatch.setattr(cudastart, "_HELD", {})
    lib, real = Libcuda(), ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: lib if name == "libcuda.so.1" else real(name, *a, **k))
    return lib


def test_the_start_retains_the_first_devices_context_once_and_a_gpu_trial_keeps_it(libcuda):
    cudastart.start()
    cudastart.start()
    cudastart.settle(uses_gpu=True)
    assert libcuda.calls == ["cuInit", "cuDeviceGet(0)", "retain"]
    cudastart.release()
    cudastart.release()
    assert libcuda.calls[3:] == ["release"]


def test_a_trial_that_needs_no_gpu_lets_the_context_go(libcuda):
    cudastart.start()
    cudastart.settle(uses_gpu=False)
    assert libcuda.calls == ["cuInit", "cuDeviceGet(0)", "retain", "release"]


def test_the_first_trial_waits_for_cudas_start_before_torch_may_race_it(libcuda):
    libcuda.opened.clear()
    cudastart.start()
    settled = threading.Thread(target=cudastart.settle, args=(True,))
    settled.start()
    time.sleep(0.1)
    assert settled.is_alive() and libcuda.calls == []
    libcuda.opened.set()
    settled.join(10)
    assert not settled.is_alive() and libcuda.calls[-1] == "retain"


@pytest.mark.parametrize("failing", ["cuInit", "cuDeviceGet(0)", "retain"])
def test_a_start_that_fails_holds_nothing_and_lets_nothing_go(libcuda, failing):
    libcuda.failing = failing
    cudastart.start()
    cudastart.settle(uses_gpu=False)
    assert libcuda.calls[-1] == failing and "release" not in libcuda.calls


def test_without_a_driver_library_the_start_is_nothing(monkeypatch):
    monkeypatch.setattr(cudastart, "_START", None)
    monkeypatch.setattr(cudastart, "_HELD", {})

    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    cudastart.start()
    cudastart.settle(uses_gpu=True)
    assert cudastart._HELD == {}


def test_an_in_process_sweep_of_a_cpu_trial_lets_the_commands_context_go(libcuda, tmp_path, monkeypatch, capsys):
    """A file or the plan can put the trial on the CPU where argv could not tell."""
    from hydra.core.global_hydra import GlobalHydra

    from sweeper.__main__ import main

    cudastart.start()
    monkeypatch.chdir(tmp_path)
    GlobalHydra.instance().clear()
    assert main([f"results_dir={tmp_path / 'results'}", "executor=local", "workload.device=cpu", *QUICK]) == 0
    assert "[1/1] ok" in capsys.readouterr().out
    assert libcuda.calls == ["cuInit", "cuDeviceGet(0)", "retain", "release"]
