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
