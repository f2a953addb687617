"""Profiles on request (`probe.profile`): torch.profiler, py-spy or nsys.

Each writes into the trial's scratch folder, whose files come back into the
trial folder. A missing tool is one warning line in the record, never a failed
trial. The profile covers steps [wait + warmup, wait + warmup + active); those
steps carry profiled=True in steps.parquet and run slower than the others.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, List, Optional

TORCH_TRACE = "torch_trace.json"
PYSPY_SVG = "pyspy.svg"


class Profile:
    """No profile: the base, and what probe.profile=none gets."""
    name = "none"
    nvtx = False   # whether the probe should put NVTX ranges around steps and phases

    def __init__(self) -> None:
        self.warnings: List[str] = []

    def start(self) -> None:
        pass

    def step(self, index: int) -> None:
        """Called after step `index` ends."""

    def stop(self) -> None:
        pass

    def profiled(self, index: int) -> bool:
        return False


class _Windowed(Profile):
    def __init__(self, wait: int, warmup: int, active: int):
        super().__init__()
        self.wait, self.warmup, self.active = wait, warmup, active

    def profiled(self, index: int) -> bool:
        return self.wait <= index < self.wait + self.warmup + self.active


class TorchProfile(_Windowed):
    """torch.profiler with schedule(wait, warmup, active), CUDA activity on a GPU; a
    Chrome trace (open in chrome://tracing or Perfetto) lands in torch_trace.json."""
    name = "torch"

    def __init__(self, out_dir: Path, wait: int, warmup: int, active: int, cuda: bool):
        super().__init__(wait, warmup, active)
        self.out, self.cuda, self.nvtx = Path(out_dir) / TORCH_TRACE, cuda, cuda
        self._prof: Any = None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self._prof = profile(activities=activities, on_trace_ready=self._save,
                             schedule=schedule(wait=self.wait, warmup=self.warmup, active=self.active, repeat=1))
        self._prof.start()

    def _save(self, prof: Any) -> None:
        prof.export_chrome_trace(str(self.out))

    def step(self, index: int) -> None:
        if self._prof is not None:
            self._prof.step()

    def stop(self) -> None:
        if self._prof is None:
            return
        self._prof.stop()
        self._prof = None
        if not self.out.exists():
            self.warnings.append(f"probe.profile=torch: no trace written; the trial ended before step "
                                 f"{self.wait + self.warmup} (probe.profile_wait + probe.profile_warmup)")


def find_pyspy() -> Optional[str]:
    """py-spy on PATH, or next to this Python (a venv's bin/ is often not on PATH)."""
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


def allow_tracing_by_children() -> None:
    """Under Yama ptrace_scope=1 a child may not attach to its parent unless the parent allows it."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)  # PR_SET_PTRACER_ANY
    except (OSError, AttributeError):
        pass


class PySpyProfile(Profile):
    """py-spy record of the whole trial (its DataLoader workers included) as a flame graph,
    pyspy.svg. Sampling is non-blocking, at `rate` Hz, from a process of its own."""
    name = "pyspy"

    def __init__(self, out_dir: Path, rate: int = 100, on_pid: Callable[[int], None] = lambda pid: None,
                 find: Callable[[], Optional[str]] = find_pyspy):
        super().__init__()
        self.out, self.rate, self.on_pid, self.find = Path(out_dir) / PYSPY_SVG, rate, on_pid, find
        self._proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        exe = self.find()
        if exe is None:
            self.warnings.append("probe.profile=pyspy: py-spy is not installed (pip install py-spy); "
                                 "the trial ran without a profile")
            return
        allow_tracing_by_children()
        cmd = [exe, "record", "--pid", str(os.getpid()), "--output", str(self.out), "--format", "flamegraph",
               "--rate", str(self.rate), "--subprocesses", "--nonblocking"]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
        self.on_pid(self._proc.pid)   # py-spy is a child too: not a DataLoader worker

    def stop(self) -> None:
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)   # py-spy writes its flame graph on Ctrl-C
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if not self.out.exists():
            tail = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            self.warnings.append(f"probe.profile=pyspy: py-spy wrote no flame graph ({tail[0]})")


class NsysProfile(_Windowed):
    """nsys cannot attach to a running process, so the probe marks the window instead:
    NVTX ranges around steps and phases, and cudaProfilerStart/Stop around the active
    steps, which `nsys profile --capture-range=cudaProfilerApi` records when the sweep
    itself runs under nsys."""
    name = "nsys"
    nvtx = True

    def __init__(self, wait: int, warmup: int, active: int, cuda: bool,
                 which: Callable[[str], Optional[str]] = shutil.which):
        super().__init__(wait, warmup, active)
        self.cuda, self.which, self._on = cuda, which, False

    def start(self) -> None:
        if self.which("nsys") is None:
            self.warnings.append("probe.profile=nsys: nsys is not on PATH; install Nsight Systems or use "
                                 "probe.profile=torch; the trial ran without a profile")
            self.nvtx = False
        elif not self.cuda:
            self.warnings.append("probe.profile=nsys: the trial has no GPU; nothing for nsys to capture")
            self.nvtx = False
        else:
            self.warnings.append(
                "probe.profile=nsys: the probe cannot attach nsys to a running trial; it marked steps "
                f"{self.wait + self.warmup}-{self.wait + self.warmup + self.active - 1} with NVTX and "
                "cudaProfilerStart/Stop: run the sweep as `nsys profile --capture-range=cudaProfilerApi "
                "--trace-fork-before-exec=true python -m sweeper hydra/launcher=basic ...` to record them")
        if self.nvtx and self.wait + self.warmup == 0:
            self._switch(True)

    def step(self, index: int) -> None:
        if self.nvtx:
            if index + 1 == self.wait + self.warmup:
                self._switch(True)
            elif index + 1 == self.wait + self.warmup + self.active:
                self._switch(False)

    def stop(self) -> None:
        if self._on:
            self._switch(False)

    def profiled(self, index: int) -> bool:
        return self.nvtx and self.wait + self.warmup <= index < self.wait + self.warmup + self.active

    def _switch(self, on: bool) -> None:
        import torch.cuda.profiler as cuda_profiler

        (cuda_profiler.start if on else cuda_profiler.stop)()
        self._on = on


def make_profile(name: str, out_dir: Optional[Path], wait: int, warmup: int, active: int, cuda: bool,
                 on_pid: Callable[[int], None] = lambda pid: None) -> Profile:
    if name == "torch" and out_dir is not None:
        return TorchProfile(out_dir, wait, warmup, active, cuda)
    if name == "pyspy" and out_dir is not None:
        return PySpyProfile(out_dir, on_pid=on_pid)
    if name == "nsys":
        return NsysProfile(wait, warmup, active, cuda)
    return Profile()
