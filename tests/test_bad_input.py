"""Every bad input and hostile condition of tests/bad_input_cases.py gets its exit code, exactly one
line on stderr that names the key or file and says what to do (no traceback), and leaves nothing
outside results_dir and the shard cache: a snapshot of the case's folder (the parent of
results_dir, HOME, TMPDIR, the working directory) and of the shard cache before and after.

Cases run in-process (the commands' `main(argv)`), in a few seconds all told; the few that need
real signals, Ray or a daemon run as subprocesses and are marked slow.
"""
from __future__ import annotations

import importlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Tuple

import pytest

from tests.bad_input_base import BAD, FAILED, INTERRUPTED, NOT_PUBLISHED, QUICK, Case
from tests.bad_input_cases import CASES, SLOW_CASES, row_key
from tests.conftest import ROOT

ENTRIES = {"sweeper": "sweeper.__main__", "report": "sweeper.report.__main__", "compare": "sweeper.compare",
           "history": "sweeper.history.__main__", "publish": "sweeper.publish",
           "prometheus": "sweeper.exporters.prometheus"}
BASE = ("executor=local", "repeats=1", "wandb.enabled=false", "report.enabled=false", "workload.steps=3",
        "workload.warmup_steps=1")
LEADS = {BAD: "error: ", INTERRUPTED: "interrupted", NOT_PUBLISHED: "not published: "}   # else "<what>: "
SAYS_WHAT_TO_DO = re.compile(r"; \S|\b(must|needs?|choose|use|give|add|drop|remove|check|install|see|try|quote|"
                             r"restore|move|rename|pick|delete)\b", re.IGNORECASE)
Snapshot = Dict[str, Tuple[bool, int, int]]
FAULT_LINES = os.environ.get("SWEEPER_FAULT_LINES") and os.path.abspath(os.environ["SWEEPER_FAULT_LINES"])


class Ctx:
    """A case's folders: T (its scratch), R = T/results, the session's shard cache and finished run."""

    def __init__(self, tmp: Path, session):
        self.T, self.R, self.session = tmp, tmp / "results", session
        self.cache, self.shard = session.cache, session.shard
        self.run, self.port, self.held = None, None, []

    def copy_run(self, run_id: str = None) -> Path:
        """The session's finished run, and its history partition, as if this results_dir ran it."""
        self.run = self.R / "single" / (run_id or self.session.run.name)
        shutil.copytree(self.session.run, self.run)
        shutil.copytree(self.session.history, self.R / "history", dirs_exist_ok=True)
        return self.run

    def hold(self, thing) -> None:
        self.held.append(thing)

    def fill(self, text: str) -> str:
        part = next((self.R / "history").rglob("*.parquet"), None)     # a file of the history store
        for key, value in (("{T}", self.T), ("{R}", self.R), ("{RUN}", self.run), ("{HIST}", self.R / "history"),
                           ("{PORT}", self.port), ("{PART}", part)):
            text = text.replace(key, str(value))
        return text

    def argv(self, case: Case):
        args = [self.fill(a) for a in case.args]
        if case.command != "sweeper":
            return args
        given = {a.split("=", 1)[0].lstrip("+") for a in args}
        base = [a for a in (f"results_dir={self.R}", *BASE) if a.split("=", 1)[0] not in given]
        # a case that starts with Hydra's flags keeps them first: overrides on both sides of a flag are a
        # mistake of their own (multirun-flag-after-overrides)
        return args + base if args and args[0].startswith("-") else base + args


# -- the session's shared files ---------------------------------------------------------------
class Session:
    def __init__(self, root: Path):
        self.cache = root / "shards"
        self.mpl = root / "mpl"


@pytest.fixture(scope="session")
def session(tmp_path_factory):
    """One shard set and one finished run (with its history partition), made once."""
    from workloads.shards import ensure_synthetic_shards

    root = tmp_path_factory.mktemp("bad_input_session")
    state = Session(root)
    state.shard = Path(ensure_synthetic_shards(str(state.cache), 2, 16, 16, 50257, 0)[0])
    with pytest.MonkeyPatch.context() as mp:
        environment(mp, root / "made", state)
        results = root / "made" / "results"
        code = invoke("sweeper", [f"results_dir={results}", *BASE, QUICK, "run_id=finished", "report.enabled=true"])
    assert code == 0
    state.run, state.history = results / "single" / "finished", results / "history"
    return state


def environment(mp: pytest.MonkeyPatch, folder: Path, session: Session) -> None:
    """HOME, TMPDIR, the working directory and the shard cache where the snapshot sees them."""
    for sub in ("home", "tmp"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    mp.chdir(folder)
    env = {"HOME": folder / "home", "TMPDIR": folder / "tmp", "SWEEPER_CACHE": session.cache,
           "MPLCONFIGDIR": session.mpl, "WANDB_MODE": "offline", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "3"}
    for key, value in env.items():
        mp.setenv(key, str(value))
    for key in ("WANDB_API_KEY", "HYDRA_FULL_ERROR"):
        mp.delenv(key, raising=False)
    mp.setattr(tempfile, "tempdir", None)
    mp.setattr(sys, "dont_write_bytecode", True)
    mp.syspath_prepend(str(folder))
    mp.setattr("sweeper.nodezygote.start_spare", lambda: None)   # a process: a slow case runs the command


def invoke(command: str, argv) -> int:
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    main = importlib.import_module(ENTRIES[command]).main
    try:
        return main(list(argv))
    except SystemExit as exc:     # pragma: no cover - the boundary must return, not exit
        pytest.fail(f"python -m {ENTRIES[command]} raised SystemExit({exc.code}) past its error boundary")


def interrupting(mp: pytest.MonkeyPatch, target: str) -> None:
    module, name = target.split(":")

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt
    mp.setattr(importlib.import_module(module), name, interrupt)


# -- what a case leaves ----------------------------------------------------------------------
# W&B makes two temporary folders when it is imported and removes them when the process ends;
# in-process they outlive the case that first imported it.
LIBRARY_TEMPS = re.compile(r"^tmp[^/]*wandb-(artifacts|media)$")


def snapshot(root: Path) -> Snapshot:
    out = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not LIBRARY_TEMPS.match(d)]
        for name in dirs + names:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            is_dir = stat.S_ISDIR(st.st_mode)
            out[os.path.relpath(path, root)] = (is_dir, 0 if is_dir else st.st_size, 0 if is_dir else st.st_mtime_ns)
    return out


def check_disk(case: Case, before: Snapshot, after: Snapshot, cache_before: Snapshot, cache_after: Snapshot) -> None:
    added, removed = after.keys() - before.keys(), before.keys() - after.keys()
    changed = {p for p in before.keys() & after.keys() if before[p] != after[p]}
    in_results = lambda p: p == "results" or p.startswith("results" + os.sep)  # noqa: E731
    outside = sorted(p for p in added | removed | changed if not in_results(p))
    assert not outside, f"written or deleted outside results_dir: {outside[:10]}"
    touched = sorted(removed | changed)
    assert not touched, f"files that were there before were changed or deleted: {touched[:10]}"
    run_folders = {p for p in added if p.count(os.sep) == 2 and after[p][0] and not p.endswith(os.sep + "history")}
    empty = sorted(p for p in run_folders if {q for q in added if q.startswith(p + os.sep)} <= {p + os.sep + "multirun.yaml"})
    assert not empty, f"empty run folders left behind: {empty}"
    if case.code == BAD or "dry_run=true" in case.args:
        files = sorted(p for p in added if not after[p][0])
        assert not files and not run_folders, f"bad input or a dry run wrote into results_dir: {(files or sorted(run_folders))[:10]}"
    gone = sorted(cache_before.keys() - cache_after.keys())
    staging = sorted(p for p in cache_after.keys() - cache_before.keys()
                     if os.path.basename(p).startswith(".") and cache_after[p][0])
    assert not gone and not staging, f"shard cache: deleted {gone[:5]}, staging left behind {staging[:5]}"


def without_trial_tracebacks(err: str) -> str:
    """A failing trial prints its own traceback (a user's workload, not sweeper) where it runs:
    executor=local runs it in this process. Those blocks (chained ones too) are the trial's."""
    if not re.search(r'trial\.py", line \d+, in execute', err):
        return err
    kept, in_block = [], False
    for line in err.splitlines():
        if line.startswith(("Traceback (most recent call last)", "During handling of the above",
                            "The above exception was the direct cause")):
            in_block = True
        elif in_block and not line.startswith(" ") and line.strip():
            in_block = False        # the exception's own line ends the block
            continue
        if not in_block and line.strip():
            kept.append(line)
    return "\n".join(kept)


def check_stderr(case: Case, ctx: Ctx, err: str) -> None:
    if case.code == FAILED:
        err = without_trial_tracebacks(err)
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == case.lines, f"expected {case.lines} line(s) on stderr, got {len(lines)}:\n" + "\n".join(lines[:20])
    if case.lines:
        line = lines[0]
        assert ctx.fill(case.names) in line, f"the line does not name {ctx.fill(case.names)!r}: {line}"
        lead = LEADS.get(case.code, "")
        assert line.startswith(lead) and re.match(r"^[A-Za-z][\w &.-]*(:|;) ", line), f"the line does not start with {lead!r}: {line}"
        if case.code != INTERRUPTED:
            assert SAYS_WHAT_TO_DO.search(line.split(": ", 1)[-1]), f"the line does not say what to do: {line}"


def check_secret(case: Case, ctx: Ctx, output: str) -> None:
    assert case.secret not in output, "the secret reached the terminal"
    leaks = [str(p) for root in (ctx.T, ctx.cache) for p in root.rglob("*")
             if p.is_file() and not p.is_symlink() and case.secret.encode() in p.read_bytes()]
    assert not leaks, f"the secret was written to {leaks[:10]}"


# -- the cases -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, session, tmp_path, capfd, monkeypatch):
    ctx = Ctx(tmp_path, session)
    environment(monkeypatch, tmp_path, session)
    ctx.hold(ray_tmpdir(case, monkeypatch))
    if case.setup:
        case.setup(ctx)
    argv = ctx.argv(case)
    if case.interrupt:
        interrupting(monkeypatch, case.interrupt)
    before, cache_before = snapshot(tmp_path), snapshot(session.cache)
    capfd.readouterr()
    code = invoke(case.command, argv)
    out, err = capfd.readouterr()
    record_line(case, err.replace(str(tmp_path), "$T"))
    for thing in ctx.held:
        thing.close()
    assert code == case.code, f"exit {code}, expected {case.code}; stderr:\n{err[-3000:]}"
    check_stderr(case, ctx, err)
    check_disk(case, before, snapshot(tmp_path), cache_before, snapshot(session.cache))
    if case.secret:
        check_secret(case, ctx, out + err)
    if case.check:
        case.check(ctx)


def test_the_table_is_long_enough_and_its_ids_unique():
    ids = [c.id for c in CASES + SLOW_CASES]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)


def test_docs_hold_the_current_table():
    doc = (ROOT / "docs" / "reliability.md").read_text()
    missing = [c.id for c in CASES + SLOW_CASES if row_key(c) not in doc]
    assert not missing, f"docs/reliability.md lacks the rows of {missing[:5]}: paste `python -m tests.bad_input_cases`"


def record_line(case: Case, err: str) -> None:
    """SWEEPER_FAULT_LINES=FILE: keeps the line each case printed, for the table in the docs."""
    path = FAULT_LINES
    if not path:
        return
    import json

    lines = [line for line in err.splitlines() if re.match(r"^[A-Za-z][\w &.-]*(:|;) ", line)]
    known = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    known[case.id] = lines[0] if lines else ""
    Path(path).write_text(json.dumps(known, indent=1, sort_keys=True))


# -- the cases that need a process of their own: real signals, Ray, a daemon -------------------------
@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=[c.id for c in SLOW_CASES])
def test_bad_input_in_a_process(case: Case, session, tmp_path, monkeypatch):
    ctx = Ctx(tmp_path, session)
    environment(monkeypatch, tmp_path, session)
    if case.setup:
        case.setup(ctx)
    for key, value in case.env:
        monkeypatch.setenv(key, ctx.fill(value))
    ray_tmp = ray_tmpdir(case, monkeypatch)
    before, cache_before = snapshot(tmp_path), snapshot(session.cache)
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *ctx.argv(case)], cwd=tmp_path, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=ignore_sigint if case.background else None)
    try:
        if case.send:
            wait_for(ctx, case.when, proc)
            proc.send_signal(getattr(signal, case.send))
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    record_line(case, err.replace(str(tmp_path), "$T"))
    assert proc.returncode == case.code, f"exit {proc.returncode}, expected {case.code}; stderr:\n{err[-3000:]}"
    check_stderr(case, ctx, err)
    assert_no_daemon(ctx.R / "daemon.pid")
    check_disk(case, before, snapshot(tmp_path), cache_before, snapshot(session.cache))
    if case.secret:
        check_secret(case, ctx, out + err)
    if case.check:
        case.check(ctx)
    ray_tmp.close()


class ray_tmpdir:
    """A short RAY_TMPDIR of the case's own where it runs on Ray (Ray's socket paths must stay under
    108 bytes: not under tmp_path), unless the case sets one; close() removes it."""

    def __init__(self, case: Case, monkeypatch):
        self.folder = None
        if "executor=ray" in case.args and "RAY_TMPDIR" not in dict(case.env):
            self.folder = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
            monkeypatch.setenv("RAY_TMPDIR", self.folder)

    def close(self) -> None:
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def ignore_sigint() -> None:
    """What a non-interactive shell does for `cmd &`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def wait_for(ctx: Ctx, pattern: str, proc: subprocess.Popen, timeout_s: float = 180) -> None:
    """Until the phase the signal is meant for has begun (a file or folder it makes appears)."""
    root, _, rest = pattern.partition("/")
    base = ctx.cache if root == "cache" else ctx.T / root
    deadline = time.monotonic() + timeout_s
    while not list(base.glob(rest)):
        assert proc.poll() is None, f"the command ended (exit {proc.returncode}) before {pattern} appeared: " \
                                    f"{proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, f"{pattern} did not appear in {timeout_s} s"
        time.sleep(0.05)


def assert_no_daemon(pid_file: Path) -> None:
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the trial's daemon (pid {pid}) outlived the command")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
