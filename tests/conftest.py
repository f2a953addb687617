import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"     # the shipped Hydra configs (the wheel carries them as sweeper/conf)


SHARDS = {"cache": None}   # one shard cache for the session's sweeps (set by shared_shard_cache)


@pytest.fixture(scope="session", autouse=True)
def shared_shard_cache(tmp_path_factory):
    """One shard cache for every sweep of the session: a shard set is written once, by the first
    sweep that asks for it, under a lock and renamed into place (workloads/shards.py), and the
    others read it. A test that checks the making of shards gives its own SWEEPER_CACHE."""
    SHARDS["cache"] = tmp_path_factory.mktemp("shards")
    yield SHARDS["cache"]
    SHARDS["cache"] = None


def checkout_first() -> str:
    """PYTHONPATH with this checkout first and the caller's after it: a host whose packages come
    from PYTHONPATH (the GPU machine's wheels) keeps them in the processes a test starts."""
    return os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])


def run_sweeper(args, tmp_path, timeout=300, env_extra=None, command=None):
    """`python -m sweeper ARGS` as a user runs it (or `command`: the `sweeper` script, say), results
    under tmp_path, shards from the session's cache. W&B is off unless ARGS turn it on: its own tests
    check it, and it costs each trial ~0.3 s."""
    if not any(a.startswith("wandb.enabled=") for a in args):
        args = [*args, "wandb.enabled=false"]
    cache = SHARDS["cache"] or tmp_path / "cache"
    env = {**os.environ, "SWEEPER_CACHE": str(cache), "PYTHONUNBUFFERED": "1",
           "WANDB_MODE": "offline", **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [*(command or [sys.executable, "-m", "sweeper"]), f"results_dir={tmp_path / 'results'}", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def installed_script() -> list:
    """The `sweeper` command that pip installed beside this Python (README: `pip install -e .`)."""
    script = Path(sys.executable).parent / "sweeper"
    assert script.is_file(), f"no {script}: install the project as the README says (pip install -e .)"
    return [str(script)]


def fresh_interpreters_young_threshold() -> float:
    """What a plain `python` runs a script under: the start's wider young generation must not reach a workload."""
    out = subprocess.run([sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"], capture_output=True,
                         text=True, check=True).stdout
    return float(out)


@pytest.fixture
def sweeper_cli(tmp_path):
    return lambda args, **kw: run_sweeper(args, tmp_path, **kw)


def in_a_mount_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`sh -c script` in a mount namespace of its own: a small tmpfs mounted there (a disk that
    fills up) vanishes with it."""
    env = {**os.environ, "SWEEPER_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)


def mount_namespaces(tmp_path: Path) -> bool:
    """Whether this machine lets the tests mount a tmpfs in a namespace of their own (root)."""
    return shutil.which("unshare") is not None and \
        in_a_mount_namespace(f"mount -t tmpfs tmpfs {tmp_path}", tmp_path).returncode == 0


def title(proc) -> str:
    """A process's command line, or "" where it ended between its listing and this read: a Ray or
    sweep process tree loses short-lived members at any moment."""
    import psutil

    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def name_of(proc) -> str:
    """A process's name, or "" where it ended after it was listed."""
    import psutil

    try:
        return proc.name()
    except psutil.Error:
        return ""


def named(procs, name: str) -> list:
    """The processes of `procs` still running under `name` (one may end after it was listed)."""
    return [proc for proc in procs if name_of(proc) == name]


def has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture(scope="module")
def host():
    """A trial host with its own zygote, shared by a module's tests."""
    from sweeper.isolation import TrialHost

    h = TrialHost()
    yield h
    h.close()


@pytest.fixture()
def node_zygote(tmp_path):
    """A zygote as the driver starts one per node: (its socket path, its process)."""
    from sweeper.isolation import ZYGOTE_START_S, _LineReader
    from sweeper.nodezygote import start_zygote

    path = str(tmp_path / "z.sock")
    proc = start_zygote(path, stdout=subprocess.PIPE)
    _LineReader(proc.stdout.fileno()).read(timeout_s=ZYGOTE_START_S)     # {"ready": pid}
    yield path, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)


# -- the slow marker, checked ---------------------------------------------------------------
# A test that starts a process (a sweep, a zygote, Ray, chromium, a forked child) is marked slow,
# so that `-m "not slow"` stays in-process and fast. An audit hook sees every process start; a
# test not marked slow that starts one fails, naming it. Short helpers a library runs for a fact
# (git for the commit, uname for the processor, fc-list for matplotlib's fonts) are let through.
INCIDENTAL = {"git", "uname", "fc-list"}
_SPAWNS = {"test": None, "seen": []}


def _audit(event, args):
    if _SPAWNS["test"] is None or event not in ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn"):
        return
    argv = args[1] if event == "subprocess.Popen" and len(args) > 1 else ()
    program = os.path.basename(str(argv[0] if isinstance(argv, (list, tuple)) and argv else argv or event))
    if program.split()[0] not in INCIDENTAL:
        _SPAWNS["seen"].append(program if event == "subprocess.Popen" else event)


sys.addaudithook(_audit)


def pytest_runtest_setup(item):
    """From the test's fixtures on (a module's fixture that starts a process counts for its first test)."""
    _SPAWNS.update(test=item.nodeid if item.get_closest_marker("slow") is None else None, seen=[])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    watched, _SPAWNS["test"] = _SPAWNS["test"] is not None, None
    if watched and _SPAWNS["seen"]:
        pytest.fail(f"starts a process ({', '.join(sorted(set(_SPAWNS['seen'])))}) but is not marked "
                    f"@pytest.mark.slow", pytrace=False)
    return result


# -- the order files are handed to pytest-xdist's workers ------------------------------------
# With `-n 2 --dist loadfile`, each file runs whole on one worker, and xdist by default hands out
# the files with the most tests first. The costly files are those with a few slow tests (a sweep
# each), so they came last and one worker ran them alone at the end. Longest first instead (LPT
# scheduling), by each file's seconds in tests/durations.json (written by a run with
# SWEEPER_STORE_DURATIONS=1); a file not listed there is estimated from its markers.
DURATIONS = Path(__file__).with_name("durations.json")
SLOW_TEST_COST, FAST_TEST_COST = 5.0, 0.25
_measured: dict = {}


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False      # keep the order set below


def _file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items):
    import json

    known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    estimate = {}
    for item in items:
        cost = SLOW_TEST_COST if item.get_closest_marker("slow") is not None else FAST_TEST_COST
        estimate[_file_of(item.nodeid)] = estimate.get(_file_of(item.nodeid), 0.0) + cost
    items.sort(key=lambda item: -known.get(_file_of(item.nodeid), estimate[_file_of(item.nodeid)]))


def pytest_runtest_logreport(report):
    if os.environ.get("SWEEPER_STORE_DURATIONS") == "1":
        _measured[_file_of(report.nodeid)] = _measured.get(_file_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session):
    if os.environ.get("SWEEPER_STORE_DURATIONS") == "1" and not hasattr(session.config, "workerinput") and _measured:
        import json

        ordered = dict(sorted(((f, round(s, 1)) for f, s in _measured.items()), key=lambda kv: -kv[1]))
        DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n")
