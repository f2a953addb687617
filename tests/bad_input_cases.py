"""The table of bad inputs and hostile conditions, and what each must get (issue 20).

Each Case is a command line as a careless or hostile user types it, with `{T}` the case's
scratch folder, `{R}` its results_dir (inside {T}), `{RUN}` a finished run copied into {R}
when the setup asks for one, `{HIST}` {R}/history. tests/test_bad_input.py runs each one
(in-process unless `slow`) and checks its exit code, its one line on stderr and what it left
on disk; `python -m tests.bad_input_cases` prints the table docs/reliability.md holds.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
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
        return " ".join((prefix, *self.args)).replace("|", "\\|")


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
CASES = [
    # 1. paths: nothing written or deleted outside results_dir
    Case("sweep-name-dotdot", "1a", (QUICK, "sweep.name=../../X"), BAD, "sweep.name"),
    Case("run-id-dotdot", "1a", (QUICK, "run_id=../../X"), BAD, "run_id"),
    Case("sweep-name-absolute", "1b", (QUICK, "sweep.name={T}/abs"), BAD, "sweep.name"),
    Case("run-id-absolute", "1b", (QUICK, "run_id={T}/abs"), BAD, "run_id"),
    Case("resume-outside-results", "1c", (QUICK, "resume={T}/victim"), BAD, "resume", setup=with_victim,
         check=victim_intact),
    Case("resume-dotdot", "1c", (QUICK, "resume=../../victim"), BAD, "resume", setup=with_victim, check=victim_intact),
    Case("sweep-name-empty", "1", (QUICK, "sweep.name="), BAD, "sweep.name"),
    Case("sweep-name-with-slash", "1", (QUICK, "sweep.name=a/b"), BAD, "sweep.name"),
    Case("sweep-name-300-chars", "9e", (QUICK, f"sweep.name={LONG_NAME}"), BAD, "sweep.name"),
    # 2. the history store: no single run breaks it
    Case("history-null-partition-then-sweep", "2", (QUICK,), OK, lines=0, setup=history_with("null"), check=appended),
    Case("history-list-null-partition", "2", ("--store", "{HIST}", "list"), OK, lines=0, command="history",
         setup=history_with("null")),
    Case("history-trend-null-partition", "2", ("--store", "{HIST}", "trend"), OK, lines=0, command="history",
         setup=history_with("null")),
    Case("no-ok-trial-not-appended", "2", (RAISES,), FAILED, lines=0, check=not_appended),
    Case("interrupt-while-shards-are-made", "2, 9h, 11a", SMALL + ("data.seed=7",), INTERRUPTED, "interrupted",
         interrupt="workloads.shards:_write_shard", check=not_appended),
    # 3. two sweeps with one run id
    Case("run-id-taken", "3", (QUICK, "run_id=fixed"), OK, lines=0, setup=lambda ctx: ctx.copy_run("fixed"),
         check=two_runs),
    # 4. credentials typed into values are written nowhere
    Case("secret-in-param-name", "4b", (QUICK, "+workload.params.api_token=SECRET-tok-7731"), OK, lines=0,
         secret="SECRET-tok-7731"),
    Case("secret-param-of-shipped-workload", "4b, 16b", ("+workload.params.api_token=SECRET-tok-7731",), BAD,
         "workload.params.api_token", secret="SECRET-tok-7731"),
    Case("secret-in-tracking-uri", "4c", (QUICK, "mlflow.enabled=true", "mlflow.tracking_uri=http://bob:PASSbob99@127.0.0.1:9"),
         OK, "mlflow", secret="PASSbob99"),
    # 5 and 10. shards checked whole before any trial
    Case("shard-cut-in-header", "5a", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_shard(files.cut_in_header)),
    Case("shard-garbled-header", "5b", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_shard(files.garbled_header)),
    Case("shard-cut-in-data", "5", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_shard(files.cut_in_data)),
    Case("shard-empty-tar", "10c", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar",
         setup=lambda ctx: files.empty_tar(ctx.T / "shard.tar")),
    Case("shard-zero-bytes", "10c", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar", setup=with_bytes("shard.tar", b"")),
    Case("shard-not-a-tar", "intro", SMALL + ("data.url={T}/shard.tar",), BAD, "shard.tar",
         setup=with_bytes("shard.tar", b"just some text\n" * 64)),
    Case("shards-missing", "intro", SMALL + ("data.url=/nonexistent/shard-{0000..0003}.tar",), BAD, "data.url"),
    Case("shards-range-mistyped", "intro", SMALL + ("data.url={T}/x-{0000..9999999}.tar", "dry_run=true"), BAD, "data.url"),
    Case("data-url-a-directory", "9c", SMALL + ("data.url={T}/shards",), BAD, "data.url", setup=with_dir("shards")),
    # 6. duplicate grid points
    Case("duplicate-grid-value", "6", SMALL + ("data.num_workers=1,1",), BAD, "data.num_workers"),
    Case("duplicate-grid-value-among-others", "6", SMALL + ("data.batch_size=4,2,4",), BAD, "data.batch_size"),
    # 7. a report for a run whose stratum failed whole
    Case("stratum-all-failed-has-report", "7", (f"{QUICK},{RAISES.split('=')[1]}", "report.enabled=true",
         "analysis.compare_within=[workload.target]"), FAILED, lines=0, check=report_written),
    # 8. config errors are bad input (2), not failed trials (1)
    Case("misspelt-key", "8a", ("data.num_wrokers=2",), BAD, "data.num_wrokers"),
    Case("misspelt-top-level-key", "8a", ("repeat=3",), BAD, "repeat"),
    Case("unknown-top-level-key", "8a", ("foo=bar",), BAD, "foo"),
    Case("wrong-type-int", "8b", ("data.num_workers=abc",), BAD, "data.num_workers"),
    Case("wrong-type-bool", "8b", ("data.pin_memory=maybe",), BAD, "data.pin_memory"),
    Case("wrong-type-float-for-int", "8b", ("data.batch_size=2.5",), BAD, "data.batch_size"),
    Case("empty-value", "8c", ("data.num_workers=",), BAD, "data.num_workers"),
    Case("null-for-required", "8c", ("repeats=null",), BAD, "repeats"),
    Case("unknown-sweep", "8d", ("+sweep=nosuch",), BAD, "sweep=nosuch"),
    Case("unknown-workload", "8e", ("workload=nosuch",), BAD, "workload=nosuch"),
    Case("unparsable-override", "8", ("data.batch_size=[1,2",), BAD, "data.batch_size"),
    Case("append-to-existing-key", "8", ("+data.num_workers=3",), BAD, "data.num_workers"),
    Case("unknown-executor", "8", ("executor=nonsense",), BAD, "executor"),
    Case("wrong-type-in-one-grid-value", "8b", ("data.num_workers=1,abc",), BAD, "data.num_workers"),
    Case("another-hydra-launcher", "8", (QUICK, "hydra/launcher=basic", "data.batch_size=2,4"), BAD, "hydra/launcher"),
    Case("hydra-run-mode", "4b, 8", (QUICK, "hydra.mode=RUN", "+workload.params.api_token=SECRET-run-5512"), BAD,
         "hydra.mode", secret="SECRET-run-5512"),        # Hydra's RUN mode wrote a folder with it, then was refused
    Case("another-hydra-sweeper", "4b, 8", (QUICK, "hydra/sweeper=basic", "+workload.params.api_token=SECRET-swp-2208"),
         BAD, "hydra/sweeper", secret="SECRET-swp-2208"),  # BasicSweeper wrote multirun.yaml with it, then ran
    Case("unknown-flag", "8", ("--bogus",), BAD, "--bogus"),
    Case("multirun-flag-after-overrides", "8", (QUICK, "-m", "data.batch_size=2,4"), BAD, "data.batch_size=2,4"),
    Case("hydra-rerun-flag", "8", ("--experimental-rerun", "{T}/job.pickle"), BAD, "--experimental-rerun"),
    Case("shell-completion-bare", "8", ("--shell-completion",), BAD, "--shell-completion"),
    Case("grid-and-unknown-key", "8", ("data.num_workers=0,2", "data.nope=1"), BAD, "data.nope"),   # not "Ambiguous value"
    Case("unknown-config-name", "8", ("--config-name=nosuch",), BAD, "nosuch"),
    Case("dali-mixed-without-a-gpu", "intro", ("data.loader=dali", "data.kind=images", "data.dali.decoder=mixed",
         "resources.gpus=0", "dry_run=true"), BAD, "data.dali.decoder"),
    Case("unknown-data-kind", "8", ("data.kind=video",), BAD, "data.kind"),
    Case("unknown-metric", "8", ("analysis.metric=p99",), BAD, "analysis.metric"),
    Case("prefetch-without-workers", "intro", ("data.num_workers=0", "data.prefetch_factor=2"), BAD,
         "data.prefetch_factor"),
    Case("negative-batch-size", "intro", ("data.batch_size=-4",), BAD, "data.batch_size"),
    Case("zero-repeats", "intro", ("repeats=0",), BAD, "repeats"),
    # issue 21: repeats=auto and its bounds
    Case("repeats-neither-number-nor-auto", "21", ("repeats=often",), BAD, "repeats"),
    Case("adaptive-is-gone", "21", ("adaptive.enabled=true",), BAD, "adaptive"),
    Case("sequential-max-below-two", "21", ("repeats=auto", "sequential.max_repeats=1"), BAD, "sequential.max_repeats"),
    Case("unknown-spending", "21", ("repeats=auto", "sequential.spending=linear"), BAD, "sequential.spending"),
    Case("repeats-auto-on-every-device", "21", ("repeats=auto", "resources.every_device=true"), BAD, "repeats=auto"),
    # 9 and 10. the target: one line, before any trial
    Case("target-raises-at-import", "9a", ("workload.target=badimport_mod:run",), BAD, "workload.target",
         setup=with_module("badimport_mod", files.RAISES_AT_IMPORT)),
    Case("target-syntax-error", "9a", ("workload.target=badsyntax_mod:run",), BAD, "workload.target",
         setup=with_module("badsyntax_mod", files.SYNTAX_ERROR)),
    Case("target-not-callable", "10a", ("workload.target=notcallable_mod:run",), BAD, "workload.target",
         setup=with_module("notcallable_mod", files.NOT_CALLABLE)),
    Case("target-missing-function", "10b", ("workload.target=tests.workloads_for_tests:nosuch",), BAD,
         "workload.target"),
    Case("target-missing-module", "intro", ("workload.target=nosuch_module_xyz:run",), BAD, "workload.target"),
    # 9d. results_dir that cannot hold results
    Case("results-dir-empty", "9d", (QUICK, "results_dir="), BAD, "results_dir"),
    Case("cache-dir-empty", "9d", SMALL + ("data.cache_dir=",), BAD, "data.cache_dir"),
    Case("results-dir-a-file", "9d", (QUICK, "results_dir={T}/afile"), BAD, "results_dir", setup=with_file("afile")),
    Case("results-dir-a-file-dry-run", "9d", (QUICK, "results_dir={T}/afile", "dry_run=true"), BAD, "results_dir",
         setup=with_file("afile")),
    Case("results-dir-under-a-file", "9d", (QUICK, "results_dir={T}/afile/sub"), BAD, "results_dir",
         setup=with_file("afile")),
    Case("results-dir-unwritable-dry-run", "9d", (QUICK, "results_dir=/proc/sweeper-results", "dry_run=true"), BAD,
         "results_dir"),
    # 9f. resume with a trial.json cut short: that trial runs again
    Case("resume-truncated-trial-json", "9f", (QUICK, "resume=latest"), BAD, "trial.json",
         setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("resume-latest-without-run", "intro", (QUICK, "resume=latest"), BAD, "resume"),
    Case("resume-unknown-run-id", "1c", (QUICK, "resume=20000101-000000"), BAD, "resume"),
    # 9g. damaged files given to the other commands: one line naming the file
    Case("report-damaged-steps", "9g", RUN, BAD, "steps.parquet", command="report",
         setup=run_with(files.damaged_parquet, "trials/*/steps.parquet")),
    Case("report-damaged-trial-json", "9g", RUN, BAD, "trial.json", command="report",
         setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("report-not-a-run", "9g", ("{T}",), BAD, "{T}", command="report"),
    Case("report-bad-metric", "9g", ("{T}", "--metric", "p99"), BAD, "--metric", command="report"),
    Case("report-baseline-matches-nothing", "9g", RUN + ("--baseline", "data.batch_size=7"), BAD, "--baseline", command="report", setup=with_run),
    Case("compare-damaged-trial-json", "9g", ("{RUN}", "{RUN}"), BAD, "trial.json", command="compare",
         setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("compare-damaged-steps", "9g", ("{RUN}", "{RUN}"), BAD, "steps.parquet", command="compare",
         setup=run_with(files.damaged_parquet, "trials/*/steps.parquet")),
    Case("compare-missing-run", "9g", ("{T}/nope", "{T}/nope2"), BAD, "nope", command="compare"),
    Case("compare-bad-ratio", "9g", ("{RUN}", "{RUN}", "--max-ratio", "0"), BAD, "--max-ratio", command="compare",
         setup=with_run),
    Case("compare-json-a-folder", "9g", ("{RUN}", "{RUN}", "--json", "{T}"), BAD, "{T}", command="compare",
         setup=with_run),
    Case("history-list-damaged-partition", "9g", ("--store", "{HIST}", "list"), OK, "broken-0.parquet",
         command="history", setup=history_with("garbage")),
    Case("history-trend-damaged-partition", "9g", ("--store", "{HIST}", "trend"), OK, "broken-0.parquet",
         command="history", setup=history_with("garbage")),
    Case("history-append-damaged-trial-json", "9g", ("--store", "{HIST}", "append", "{RUN}"), BAD, "trial.json",
         command="history", setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("history-append-into-damaged-store", "2, 9g", ("--store", "{R}/h2", "append", "{RUN}"), OK, lines=0,
         command="history", setup=store_with_garbage),
    Case("history-no-store", "9g", ("--store", "{T}/nostore", "list"), BAD, "--store", command="history"),
    Case("history-unknown-command", "9g", ("nosuch",), BAD, "nosuch", command="history"),
    Case("history-diff-unknown-runs", "9g", ("--store", "{HIST}", "diff", "a", "b"), BAD, "a",
         command="history", setup=with_run),
    Case("history-sql-empty", "9g", ("--store", "{HIST}", "sql", ""), BAD, "sql", command="history", setup=with_run),
    # 9g. the Prometheus exporter
    Case("prometheus-port-out-of-range", "9g", ("{RUN}", "--port", "70000"), BAD, "--port", command="prometheus",
         setup=with_run),
    Case("prometheus-port-negative", "9g", ("{RUN}", "--port", "-1"), BAD, "--port", command="prometheus", setup=with_run),
    Case("prometheus-port-in-use", "9g", ("{RUN}", "--port", "{PORT}"), BAD, "--port", command="prometheus",
         setup=port_taken),
    Case("prometheus-host-unknown", "9g", ("{RUN}", "--host", "nosuch.invalid"), BAD, "--host", command="prometheus", setup=with_run),
    Case("prometheus-no-run", "9g", ("{T}",), BAD, "{T}", command="prometheus"),
    Case("prometheus-no-history-store", "9g", ("{RUN}", "--history", "{T}/nohist"), BAD, "--history",
         command="prometheus", setup=with_run),
    Case("publish-without-key", "intro", RUN, NOT_PUBLISHED, "{RUN}", command="publish", setup=with_report_spec),
    Case("publish-not-a-run", "intro", ("{T}",), BAD, "{T}", command="publish"),
    # 9h and 14. an interrupt at every phase: 130 and one line
    Case("interrupt-while-planning", "14", (QUICK,), INTERRUPTED, "interrupted", interrupt="sweeper.driver:plan"),
    Case("interrupt-while-composing", "14", (QUICK,), INTERRUPTED, "interrupted",
         interrupt="hydra_plugins.sweeper_ray_launcher._core:root_config_from_dict"),
    Case("interrupt-while-report-is-written", "9h, 14", (QUICK, "report.enabled=true"), INTERRUPTED, "interrupted",
         interrupt="sweeper.report:write_report"),
    Case("interrupt-after-last-trial", "14", (QUICK,), INTERRUPTED, "interrupted",
         interrupt="sweeper.driver:publish_end"),
    # 12. a dry run leaves no run folder
    Case("dry-run-leaves-no-run-folder", "12", (QUICK, "dry_run=true"), OK, lines=0, check=no_run_folder),
    # 16. accepted without a word before
    Case("absurd-num-workers", "16a", SMALL + ("data.num_workers=100000", "dry_run=true"), BAD, "data.num_workers"),
    Case("unknown-workload-param", "16b", ("+workload.params.bogus=1",), BAD, "workload.params.bogus"),
    Case("wandb-dir-unwritable", "16c", (QUICK, "wandb.enabled=true", "wandb.dir=/proc/sweeper-wandb"), BAD, "wandb.dir"),
    Case("wandb-project-with-slash", "16c", (QUICK, "wandb.enabled=true", "wandb.project=a/b"), BAD, "wandb.project"),
    Case("history-dir-a-file", "16c", (QUICK, "history.dir={T}/afile"), BAD, "history.dir", setup=with_file("afile")),
    Case("history-dir-under-a-file", "16c", (QUICK, "history.dir={T}/afile/h"), BAD, "history.dir",
         setup=with_file("afile")),
    Case("ray-address-not-an-address", "15", (QUICK, "ray.address=http://head"), BAD, "ray.address"),
    Case("ray-address-nothing-listens", "15", (QUICK, "executor=ray", "ray.address=127.0.0.1:9"), BAD, "ray.address"),
    Case("overnight-sweep-named-twice", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader,dataloader]",
         "overnight.lock_file={T}/lock"), BAD, "overnight.sweeps"),
    Case("overnight-alerts-not-importable", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader]",
         "overnight.lock_file={T}/lock", "overnight.alerts=nosuch_mod:fn") + SMALL, BAD, "overnight.alerts"),
    Case("cuda-without-a-gpu", "intro", (QUICK, "workload.device=cuda", "resources.gpus=0"), FAILED, lines=0,
         check=not_started),
    Case("memory-limit-infinite", "intro", (QUICK, "resources.memory_limit_gb=inf"), BAD, "resources.memory_limit_gb"),
    Case("seed-past-64-bits", "intro", (QUICK, "workload.seed=99999999999999999999"), BAD, "workload.seed"),
    Case("seed-negative", "intro", (QUICK, "workload.seed=-5"), BAD, "workload.seed"),
    Case("absurd-threads", "16a", (QUICK, "workload.threads=100000", "dry_run=true"), BAD, "workload.threads"),
    Case("absurd-world-size", "16a", ("workload=train_step", "train.world_size=100000", "dry_run=true"), BAD, "train.world_size"),
    Case("ray-runtime-env-refused", "intro", (QUICK, "executor=ray", "+ray.runtime_env={env_vars:{A:1}}"), BAD, "ray.runtime_env"),
    Case("ray-cpus-negative", "intro", (QUICK, "executor=ray", "ray.num_cpus=-1"), BAD, "ray.num_cpus"),
]


def row_key(case: Case) -> str:
    """The columns of a case's row that come from the table; the printed line follows them."""
    names = case.names.replace("{T}", "the folder").replace("{RUN}", "the run folder") or "(nothing on stderr)"
    return f"| {case.id} | {case.point} | `{case.doc_input()}` | {case.code} | {names} |"


def markdown_table(printed: dict) -> str:
    """printed: case id -> the line it printed (tests/test_bad_input.py records them)."""
    rows = ["| case | issue point | command | exit | the line names | the line, as printed |",
            "|---|---|---|---|---|---|"]
    for case in CASES + SLOW_CASES:
        line = printed.get(case.id, "")
        rows.append(f"{row_key(case)} {line.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


SLOW_CASES = [
    Case("sigint-while-shards-are-made", "2, 9h, 11a", ("data.num_shards=48", "data.samples_per_shard=1024",
         "data.seq_len=4096"), INTERRUPTED, "interrupted", slow=True, send="SIGINT", when="cache/.tokens-*/*",
         check=not_appended),
    Case("sigint-ignored-overnight-suite", "15", ("+sweep=overnight", "overnight.lock_file={T}/lock",
         "overnight.sweeps=[dataloader]", "overnight.budget_s=600") + SMALL, INTERRUPTED, "interrupted", slow=True,
         send="SIGINT", when="results/overnight/*/*", background=True),
    Case("overnight-unknown-sweep-after-one", "15", ("+sweep=overnight", "overnight.sweeps=[dataloader,nosuch]",
         "overnight.lock_file={T}/lock") + SMALL, BAD, "sweep=nosuch", slow=True),
    Case("sigterm-while-ray-trial-runs", "11b", ("workload.target=tests.workloads_for_tests:hangs_with_children",
         "+workload.params.pid_file={R}/children.pid", "executor=ray"), INTERRUPTED, "interrupted", slow=True,
         send="SIGTERM", when="results/children.pid"),
    Case("secret-in-url-userinfo", "4a", ("executor=local",) + SMALL +
         ("data.url='pipe:curl -s https://user:PASSW0RD@host/x.tar'",), FAILED, lines=0, secret="PASSW0RD", slow=True),
    Case("wandb-offline-default", "4, 13", (QUICK, "wandb.enabled=true"), OK, lines=0, slow=True),
    Case("wandb-online-unreachable", "13", (QUICK, "executor=local", "repeats=2", "wandb.enabled=true", "wandb.mode=online"), OK,
         "wandb", slow=True, env=(("WANDB_BASE_URL", "http://127.0.0.1:9"), ("WANDB_API_KEY", "x" * 40),
                                  ("WANDB_MODE", "online"), ("WANDB_INIT_TIMEOUT", "3")), check=kept_offline),
    Case("daemon-of-a-local-trial", "11c", ("workload.target=daemon_mod:run", "+workload.params.pid_file={R}/daemon.pid"),
         OK, lines=0, setup=with_module("daemon_mod", files.DAEMON), slow=True),
]


if __name__ == "__main__":
    import sys

    # python -m tests.bad_input_cases [LINES.json]: LINES.json from SWEEPER_FAULT_LINES=LINES.json pytest ...
    print(markdown_table(json.loads(Path(sys.argv[1]).read_text()) if len(sys.argv) > 1 else {}), end="")
