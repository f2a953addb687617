"""The bad-input cases of paths and names: nothing written or deleted outside results_dir, and a dry run writes
nothing."""
from tests import bad_input_files as files
from tests.bad_input_base import (BAD, OK, QUICK, SMALL, LONG_NAME, Case, no_run_folder, run_with, two_runs,
                                  victim_intact, with_file, with_victim)

CASES = [
    Case("sweep-name-dotdot", "1a", (QUICK, "sweep.name=../../X"), BAD, "sweep.name"),
    Case("run-id-dotdot", "1a", (QUICK, "run_id=../../X"), BAD, "run_id"),
    Case("sweep-name-absolute", "1b", (QUICK, "sweep.name={T}/abs"), BAD, "sweep.name"),
    Case("run-id-absolute", "1b", (QUICK, "run_id={T}/abs"), BAD, "run_id"),
    Case("resume-outside-results", "1c", (QUICK, "resume={T}/victim"), BAD, "resume", setup=with_victim,
         check=victim_intact),
    Case("resume-dotdot", "1c", (QUICK, "resume=../../victim"), BAD, "resume", setup=with_victim, check=victim_intact),
    Case("sweep-name-empty", "1", (QUICK, "sweep.name="), BAD, "sweep.name"),
    Case("sweep-name-with-slash", "1", (QUICK, "sweep.name=a/b"), BAD, "sweep.name"),
    Case("sweep-name-not-ascii", "audit", (QUICK, "sweep.name=nüm"), BAD, "sweep.name: must be a plain name of ASCII"),
    Case("run-id-not-ascii", "audit", (QUICK, "run_id=lauf-ü"), BAD, "run_id: must be a plain name of ASCII"),
    Case("sweep-name-300-chars", "9e", (QUICK, f"sweep.name={LONG_NAME}"), BAD, "sweep.name"),
    Case("run-id-taken", "3", (QUICK, "run_id=fixed"), OK, lines=0, setup=lambda ctx: ctx.copy_run("fixed"),
         check=two_runs),
    Case("results-dir-empty", "9d", (QUICK, "results_dir="), BAD, "results_dir"),
    Case("results-dir-of-an-unknown-user", "audit", (QUICK, "results_dir='~nosuchuser/r'", "dry_run=true"), BAD,
         "results_dir: ~nosuchuser is no user of this machine"),          # pathlib's RuntimeError: exit 70
    Case("cache-dir-of-an-unknown-user", "audit", SMALL + ("data.cache_dir='~nosuchuser/c'", "dry_run=true"), BAD,
         "data.cache_dir: ~nosuchuser is no user"),         # os.path's expanduser: a folder named ~nosuchuser
    Case("cache-dir-empty", "9d", SMALL + ("data.cache_dir=",), BAD, "data.cache_dir"),
    Case("results-dir-a-file", "9d", (QUICK, "results_dir={T}/afile"), BAD, "results_dir", setup=with_file("afile")),
    Case("results-dir-a-file-dry-run", "9d", (QUICK, "results_dir={T}/afile", "dry_run=true"), BAD, "results_dir",
         setup=with_file("afile")),
    Case("results-dir-under-a-file", "9d", (QUICK, "results_dir={T}/afile/sub"), BAD, "results_dir",
         setup=with_file("afile")),
    Case("results-dir-unwritable-dry-run", "9d", (QUICK, "results_dir=/proc/sweeper-results", "dry_run=true"), BAD,
         "results_dir"),
    Case("resume-truncated-trial-json", "9f", (QUICK, "resume=latest"), BAD, "trial.json",
         setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("resume-latest-without-run", "intro", (QUICK, "resume=latest"), BAD, "resume"),
    Case("resume-with-other-settings", "audit", (QUICK, "workload.steps=5", "resume=latest"), BAD,
         "does not plan (workload.steps 3 there, 5 here)", setup=lambda ctx: ctx.copy_run()),  # 2 configurations, 1 run
    Case("resume-unknown-run-id", "1c", (QUICK, "resume=20000101-000000"), BAD, "resume"),
    Case("dry-run-leaves-no-run-folder", "12", (QUICK, "dry_run=true"), OK, lines=0, check=no_run_folder),
    Case("history-dir-a-file", "16c", (QUICK, "history.dir={T}/afile"), BAD, "history.dir", setup=with_file("afile")),
    Case("history-default-a-file", "audit", (QUICK, "results_dir={T}/res"), BAD, "history.dir: {T}/res/history is a file",
         setup=lambda ctx: (ctx.T / "res").mkdir() or (ctx.T / "res" / "history").write_text("not a folder\n")),
    Case("cache-dir-a-file", "audit", SMALL + ("data.cache_dir={T}/afile",), BAD, "data.cache_dir: {T}/afile is a file",
         setup=with_file("afile")),                  # every trial failed, each with the same traceback
    Case("history-dir-under-a-file", "16c", (QUICK, "history.dir={T}/afile/h"), BAD, "history.dir",
         setup=with_file("afile")),
]
