"""Small user-style workloads for tests: `run(cfg, probe)` functions named by import path."""
import gc
import os
import signal
import sys
import time
from pathlib import Path

YOUNG_THRESHOLD_AT_IMPORT = gc.get_threshold()[0]     # sweeper/youngcollector.py: the start's, in a sweep


def quick(cfg, probe):
    """Returns at once after a few timed steps of params.sleep_s. With params.held_while, a step
    sleeps only while that file exists: a test holds its trials running until it has done what it
    needed them running for, then lets them (and any run again) finish at once. Its figures say
    which young-generation threshold the collector ran it under, and imported its module under
    (sweeper/youngcollector.py)."""
    sleep_s, held_while = cfg.workload.params.get("sleep_s", 0.001), cfg.workload.params.get("held_while")
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=1):
            with probe.phase("work"):
                if held_while is None or os.path.exists(held_while):
                    time.sleep(sleep_s)
    return {"custom_figure": 42.0, "gc_young_threshold": float(gc.get_threshold()[0]),
            "gc_young_threshold_at_import": float(YOUNG_THRESHOLD_AT_IMPORT)}


_KEPT = []


def leaves_a_pool(cfg, probe):
    """`quick`, leaving an idle thread pool that it keeps and never shuts down, as user code does (a
    module's own pool): its worker is no daemon, and only Python's own shutdown tells it to end
    before it is joined."""
    import concurrent.futures

    _KEPT.append(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    _KEPT[-1].submit(time.sleep, 0).result()
    return quick(cfg, probe)


def quick_announced(cfg, probe):
    """`quick`, after leaving a file named by its pid in params.started_dir: a test can wait
    until trials really run instead of guessing how long that takes."""
    started = Path(cfg.workload.params["started_dir"])
    started.mkdir(parents=True, exist_ok=True)
    (started / str(os.getpid())).touch()
    hold_after, held_while = cfg.workload.params.get("hold_after"), cfg.workload.params.get("held_while")
    if hold_after is not None and len(list(started.iterdir())) > hold_after:
        while os.path.exists(held_while):      # with params.hold_after=N, every trial after the Nth to
            time.sleep(0.02)                   # start waits here until the test lets it go
    return quick(cfg, probe)


def raises(cfg, probe):
    with probe.step(items=1):
        pass
    raise ValueError("injected failure for the test")


def hangs(cfg, probe):
    time.sleep(3600)


def kills_itself(cfg, probe):
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep_forever():
    time.sleep(3600)


def hangs_with_children(cfg, probe):
    """Like a stuck DataLoader: worker processes of its own, then no progress."""
    import multiprocessing

    children = [multiprocessing.get_context("fork").Process(target=_sleep_forever) for _ in range(2)]
    for child in children:
        child.start()
    with open(cfg.workload.params["pid_file"], "w") as f:
        f.write(" ".join(str(c.pid) for c in children))
    time.sleep(3600)


def sleepy(cfg, probe):
    """Sleeps workload.params.sleep_s per step, times SWEEPER_TEST_SLOWDOWN (an injected
    slowdown that leaves the cell id alone, so runs with and without it match cell by cell)."""
    slowdown = float(os.environ.get("SWEEPER_TEST_SLOWDOWN", "1"))
    sleep_s = cfg.workload.params.get("sleep_s", 0.002) * slowdown
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=cfg.data.batch_size):
            with probe.phase("wait"):
                time.sleep(sleep_s)
            with probe.phase("work"):
                time.sleep(sleep_s / 4)
    return {"sleep_s": sleep_s}


def grabs_memory(cfg, probe):
    """Allocates past the trial's own memory cap (resources.memory_limit_gb), 100 MB at a time."""
    import numpy as np

    held = []
    for _ in range(1000):
        with probe.step(items=1):
            held.append(np.ones(100_000_000 // 8))
    return {"held": len(held)}


def cuda_oom_above(cfg, probe):
    """Raises PyTorch's real OutOfMemoryError when the batch is above params.max_batch."""
    import torch

    if cfg.data.batch_size > cfg.workload.params.get("max_batch", 4):
        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {cfg.data.batch_size} GiB")
    return quick(cfg, probe)


def leaks_secret(cfg, probe):
    """Prints and returns the W&B key, as careless user code might."""
    key = os.environ.get("WANDB_API_KEY", "")
    print(f"my key is {key}")
    with probe.step(items=1):
        probe.record(note=f"key={key}")
    return {"echo": key}


# -- processes that leave the trial's process group (tests/test_containment.py) --------
_IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"

# double-forks as a classic daemon does: fork, setsid, fork again, the middle one exits, so the
# daemon's parent is gone before the trial ends; it writes its own pid to argv[1]
_DAEMON = """
import os, signal, sys, time
if os.fork():
    os.wait()
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3600)
"""


def starts_escapees(cfg, probe):
    """Starts a new-session child and a double-forked daemon (both ignore SIGTERM), writes their
    pids to params.pid_file, then ends as params.then says: "return", "raise" or "hang"."""
    import subprocess
    import sys

    pid_file = cfg.workload.params["pid_file"]
    child = subprocess.Popen([sys.executable, "-c", _IGNORES_SIGTERM], start_new_session=True)
    subprocess.run([sys.executable, "-c", _DAEMON, pid_file + ".daemon"], check=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(pid_file + ".daemon") and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(pid_file + ".daemon") as f:
        daemon = int(f.read())
    with open(pid_file + ".tmp", "w") as f:
        f.write(f"{child.pid} {daemon}")
    os.rename(pid_file + ".tmp", pid_file)      # the test reads both pids or none
    then = cfg.workload.params.get("then", "return")
    if then == "raise":
        raise RuntimeError("failed after starting escapees")
    if then == "hang":
        time.sleep(3600)
    return quick(cfg, probe)


def noisy(cfg, probe):
    """Sleeps workload.params.sleep_s per step, times a factor that alternates between 1
    and params.swing from one run to the next (a count kept in params.counter_file): a cell
    whose throughput never settles. swing=1 (or no counter file): a quiet cell."""
    swing, counter = float(cfg.workload.params.get("swing", 1.0)), cfg.workload.params.get("counter_file")
    factor = 1.0
    if counter:
        counter = f"{counter}.{swing:g}"       # one count per cell
        runs = int(open(counter).read() or 0) if os.path.exists(counter) else 0
        with open(counter, "w") as f:
            f.write(str(runs + 1))
        factor = swing if runs % 2 else 1.0
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=1):
            time.sleep(cfg.workload.params.get("sleep_s", 0.02) * factor)
    return {}


# cell -> how much slower than the baseline its steps are (the issue 21 workload: +0, +0, +3, +10, +30%)
SHIFTS = {"base": 0.0, "same": 0.0, "plus3": 0.03, "plus10": 0.10, "plus30": 0.30}


def shifted(cfg, probe):
    """Sleeps workload.params.sleep_s x (1 + the shift of workload.params.variant, SHIFTS) per
    step, times a log-normal jitter of workload.params.jitter (0.03: 3% per step): cells whose
    true differences are known, for judging the verdicts on a real machine."""
    import random

    params = cfg.workload.params
    slower = 1.0 + SHIFTS[str(params.get("variant", "base"))]
    rng = random.Random(os.urandom(8))
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=1):
            time.sleep(params.get("sleep_s", 0.01) * slower * rng.lognormvariate(0.0, params.get("jitter", 0.03)))
    return {}


def chatty(cfg, probe):
    """Prints params.mb megabytes of output (a workload that logs every step for hours), then `quick`."""
    line = "x" * 99 + "\n"
    for _ in range(int(cfg.workload.params.get("mb", 8)) * 10_000):
        sys.stdout.write(line)
    sys.stdout.write("the last line\n")
    sys.stdout.flush()
    return quick(cfg, probe)
