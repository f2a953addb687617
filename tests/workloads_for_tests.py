"""Small user-style workloads for tests: `run(cfg, probe)` functions named by import path."""
import os
import signal
import time


def quick(cfg, probe):
    """Returns at once after a few timed steps."""
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=1):
            with probe.phase("work"):
                time.sleep(cfg.workload.params.get("sleep_s", 0.001))
    return {"custom_figure": 42.0}


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
