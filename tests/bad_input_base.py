"""What a bad-input case is (Case), and the setups and checks the area tables share.

The tables live by area (tests/bad_input_cli.py, _config, _paths, _data, _runs, _history,
_commands, _overnight); tests/bad_input_cases.py joins them, and tests/test_bad_input.py runs them.
A Case is a command line as a careless or hostile user types it, with `{T}` the case's scratch
folder, `{R}` its results_dir (inside {T}), `{RUN}` a finished run copied into {R} when the setup
asks for one, `{HIST}` {R}/history, `{PART}` a parquet file of it.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from tests import bad_input_files as files

BAD, FAILED, OK, NOT_PUBLISHED, INTERRUPTED = 2, 1, 0, 3, 130
QUICK = "workload.target=tests.workloads_for_tests:quick"
RAISES = "workload.target=tests.workloads_for_tests:raises"
SMALL = ("data.num_shards=2", "data.samples_per_shard=16", "data.seq_len=16", "data.batch_size=4")
LONG_NAME = "n" * 300


@dataclass(frozen=True)
class Case:
    id: str
    point: str                        # the point (and sub-case) it reproduces
    args: Tuple[str, ...]
    code: int
    names: str = ""                   # what the one stderr line must contain: the key, flag or file
    command: str = "sweeper"          # sweeper, report, compare, history, publish, prometheus
    setup: Optional[Callable] = None  # (ctx) -> None: the files the case starts from
    lines: int = 1                    # stderr lines: 1, or 0 for a run with nothing to say
    check: Optional[Callable] = None  # (ctx) -> None: what else must hold afterwards
    interrupt: str = ""               # "module:function" that raises KeyboardInterrupt when called
    secret: str = ""                  # must appear in no file and no output
    slow: bool = False                # a subprocess case (signals, daemons); marked slow
    send: str = ""                    # slow cases: the signal sent once `when` exists
    when: str = ""                    # slow cases: a glob under {T} (or cache/...) that marks the phase
    background: bool = False          # slow cases: started as a script's background job (SIGINT ignored)
    env: Tuple[Tuple[str, str], ...] = ()   # slow cases: more environment

    def doc_input(self) -> str:
        prefix = "python -m sweeper" + ("" if self.command == "sweeper" else f".{self.command}".replace(
            ".prometheus", ".exporters.prometheus"))
        return " ".join((prefix, *(a or "''" for a in self.args))).replace("|", "\\|")


# -- setups ---------------------------------------------------------------------------------
def with_run(ctx) -> None:
    """A finished run in {R} and its history partition, as a sweep leaves them."""
    ctx.copy_run()


def with_victim(ctx) -> None:
    files.victim(ctx.T / "victim")


def with_file(name: str) -> Callable:
    return lambda ctx: (ctx.T / name).write_text("not a folder\n")


def with_dir(name: str) -> Callable:
    return lambda ctx: (ctx.T / name).mkdir()


def with_shard(make: Callable) -> Callable:
    return lambda ctx: make(ctx.shard, ctx.T / "shard.tar")


def with_module(name: str, source: str) -> Callable:
    return lambda ctx: files.module(ctx.T, name, source)


def with_bytes(name: str, data: bytes) -> Callable:
    return lambda ctx: (ctx.T / name).write_bytes(data)


def run_with(damage: Callable, relative: str) -> Callable:
    def setup(ctx):
        run = ctx.copy_run()
        damage(next(run.glob(relative)))
    return setup


def history_with(kind: str) -> Callable:
    def setup(ctx):
        ctx.copy_run()
        real = next((ctx.R / "history").rglob("*.parquet"))
        part = real.with_name("broken-0.parquet")       # beside this machine's own nights
        if kind == "null":
            files.null_partition(real, part)
        else:
            part.parent.mkdir(parents=True, exist_ok=True)
            part.write_bytes(b"PAR1 this is not parquet")
    return setup


def with_report_spec(ctx) -> None:
    """A run as a sweep with W&B on leaves it: a W&B report spec to publish."""
    (ctx.copy_run() / "wandb_report.json").write_text("{}")


def store_with_garbage(ctx) -> None:
    """A run to append, and a store elsewhere that holds only a damaged partition."""
    ctx.copy_run()
    part = ctx.R / "h2" / "machine=elsewhere" / "sweep=single" / "broken-0.parquet"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"PAR1 this is not parquet")


def port_taken(ctx) -> None:
    ctx.copy_run()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    ctx.hold(sock)
    ctx.port = sock.getsockname()[1]


# -- checks ---------------------------------------------------------------------------------
def report_written(ctx) -> None:
    runs = [p for p in ctx.R.glob("single/*") if (p / "trials").is_dir()]
    assert runs and all((p / "report.html").is_file() and (p / "report.md").is_file() for p in runs)


def appended(ctx) -> None:
    new = [p for p in (ctx.R / "history").rglob("*.parquet") if p.name != "broken-0.parquet"]
    assert len(new) >= 2, f"the run was not appended to the history: {new}"


def not_appended(ctx) -> None:
    assert not list((ctx.R / "history").rglob("*.parquet")), "a run with no ok trial was appended"


def kept_offline(ctx) -> None:
    """Both trials and the summary are W&B runs kept offline, ready for `wandb sync`."""
    kept = list(ctx.R.glob("single/*/wandb/offline-run-*/run-*.wandb"))
    assert len(kept) == 3, kept


def two_runs(ctx) -> None:
    runs = sorted(p.name for p in (ctx.R / "single").iterdir() if (p / "trials").is_dir())
    assert len(runs) == 2 and runs[0] == "fixed", runs


def victim_intact(ctx) -> None:
    assert (ctx.T / "victim" / "trials" / ".keep" / "f").read_text() == "x\n"
    assert sorted(p.name for p in (ctx.T / "victim").iterdir()) == ["notes.txt", "trials"]


def not_started(ctx) -> None:
    """Recorded as infeasible, with its reason, instead of started to fail."""
    records = [json.loads(p.read_text()) for p in ctx.R.glob("single/*/trials/*/trial.json")]
    assert [r["status"] for r in records] == ["infeasible"], records


def no_run_folder(ctx) -> None:
    assert not [p for p in ctx.R.glob("*/*") if p.is_dir() and p.name != "history"]


RUN = ("{RUN}",)
