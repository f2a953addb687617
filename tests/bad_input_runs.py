"""The bad-input cases of runs that start: the history, interrupts at every phase, secrets, trials that fail or
cannot start."""
from tests import bad_input_files as files
from tests.bad_input_base import (BAD, FAILED, OK, INTERRUPTED, QUICK, RAISES, SMALL, Case, appended, history_with,
                                  kept_offline, not_appended, not_started, report_written, with_module)

CASES = [
    Case("history-null-partition-then-sweep", "2", (QUICK,), OK, lines=0, setup=history_with("null"), check=appended),
    Case("no-ok-trial-not-appended", "2", (RAISES,), FAILED, lines=0, check=not_appended),
    Case("interrupt-while-shards-are-made", "2, 9h, 11a", SMALL + ("data.seed=7",), INTERRUPTED, "interrupted",
         interrupt="workloads.shards:_write_shard", check=not_appended),
    Case("secret-in-param-name", "4b", (QUICK, "+workload.params.api_token=SECRET-tok-7731"), OK, lines=0,
         secret="SECRET-tok-7731"),
    Case("secret-in-tracking-uri", "4c", (QUICK, "mlflow.enabled=true", "mlflow.tracking_uri=http://bob:PASSbob99@127.0.0.1:9"),
         OK, "mlflow", secret="PASSbob99"),
    Case("stratum-all-failed-has-report", "7", (f"{QUICK},{RAISES.split('=')[1]}", "report.enabled=true",
         "analysis.compare_within=[workload.target]"), FAILED, lines=0, check=report_written),
    Case("interrupt-while-planning", "14", (QUICK,), INTERRUPTED, "interrupted", interrupt="sweeper.driver:plan"),
    Case("interrupt-while-composing", "14", (QUICK,), INTERRUPTED, "interrupted",
         interrupt="hydra_plugins.sweeper_ray_launcher._core:root_config_from_dict"),
    Case("interrupt-while-report-is-written", "9h, 14", (QUICK, "report.enabled=true"), INTERRUPTED, "interrupted",
         interrupt="sweeper.report:write_report"),
    Case("interrupt-after-last-trial", "14", (QUICK,), INTERRUPTED, "interrupted",
         interrupt="sweeper.driver:publish_end"),
    Case("cuda-without-a-gpu", "intro", (QUICK, "workload.device=cuda", "resources.gpus=0"), FAILED, lines=0,
         check=not_started),
    Case("sigint-while-shards-are-made", "2, 9h, 11a", ("data.num_shards=48", "data.samples_per_shard=1024",
         "data.seq_len=4096"), INTERRUPTED, "interrupted", slow=True, send="SIGINT", when="cache/.tokens-*/*",
         check=not_appended),
    Case("sigterm-while-ray-trial-runs", "11b", ("workload.target=tests.workloads_for_tests:hangs_with_children",
         "+workload.params.pid_file={R}/children.pid", "executor=ray"), INTERRUPTED, "interrupted", slow=True,
         send="SIGTERM", when="results/children.pid"),
    Case("secret-in-url-userinfo", "4a", ("executor=local",) + SMALL +
         ("data.url='pipe:curl -s https://user:PASSW0RD@host/x.tar'",), FAILED, lines=0, secret="PASSW0RD", slow=True),
    Case("wandb-offline-default", "4, 13", (QUICK, "wandb.enabled=true"), OK, lines=0, slow=True),
    Case("wandb-online-unreachable", "13", (QUICK, "executor=local", "repeats=2", "wandb.enabled=true", "wandb.mode=online"), OK,
         "wandb", slow=True, env=(("WANDB_BASE_URL", "http://127.0.0.1:9"), ("WANDB_API_KEY", "x" * 40),
                                  ("WANDB_MODE", "online"), ("WANDB_INIT_TIMEOUT", "3")), check=kept_offline),
    Case("temp-folder-too-deep-for-rays-sockets", "audit", (QUICK, "executor=ray"), BAD, "RAY_TMPDIR: too long a path",
         slow=True, env=(("RAY_TMPDIR", "{T}/" + "t" * 60),), setup=lambda ctx: (ctx.T / ("t" * 60)).mkdir()),
    Case("ray-tmpdir-relative", "audit", (QUICK, "executor=ray"), BAD, "RAY_TMPDIR=rel: a local Ray needs an absolute",
         slow=True, env=(("RAY_TMPDIR", "rel"),), setup=lambda ctx: (ctx.T / "rel").mkdir()),   # the raylet's SIGABRT
    Case("ray-tmpdir-not-writable", "audit", (QUICK, "executor=ray"), BAD, "RAY_TMPDIR=/proc/sys: /proc/sys cannot be",
         slow=True, env=(("RAY_TMPDIR", "/proc/sys"),)),        # it said "0 B free" (procfs), and to free space
    Case("ray-address-from-the-environment", "audit", (QUICK, "executor=ray"), BAD, "fix RAY_ADDRESS, from which it came",
         slow=True, env=(("RAY_ADDRESS", "127.0.0.1:9"),)),    # ignored: a local Ray ran where a cluster was named
    Case("wandb-init-timeout-zero", "audit", (QUICK, "wandb.enabled=true", "wandb.mode=online"), BAD,
         "WANDB_INIT_TIMEOUT=0: must be a positive number", slow=True,     # waited forever on W&B's teardown
         env=(("WANDB_INIT_TIMEOUT", "0"), ("WANDB_BASE_URL", "http://127.0.0.1:9"), ("WANDB_API_KEY", "x" * 40))),
    Case("daemon-of-a-local-trial", "11c", ("workload.target=daemon_mod:run", "+workload.params.pid_file={R}/daemon.pid"),
         OK, lines=0, setup=with_module("daemon_mod", files.DAEMON), slow=True),
]
