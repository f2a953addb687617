"""The bad-input cases of config keys and values: misspelt, mistyped, empty, absurd or refused; one line before
any trial."""
from tests import bad_input_files as files
from tests.bad_input_base import BAD, QUICK, SMALL, Case, with_module


def own_sweeps(**texts):
    """A case's setup: sweep files of the user's own (name -> its text) in {T}/conf/sweep."""
    def setup(ctx) -> None:
        folder = ctx.T / "conf" / "sweep"
        folder.mkdir(parents=True)
        for name, text in texts.items():
            (folder / f"{name}.yaml").write_text(text)
    return setup


def in_a_cycle(name: str, other: str) -> str:
    return f"# @package _global_\ndefaults: [{other}]\nsweep: {{name: {name}}}\n"


CASES = [
    Case("secret-param-of-shipped-workload", "4b, 16b", ("+workload.params.api_token=SECRET-tok-7731",), BAD,
         "workload.params.api_token", secret="SECRET-tok-7731"),
    Case("duplicate-grid-value", "6", SMALL + ("data.num_workers=1,1",), BAD, "data.num_workers"),
    Case("duplicate-grid-value-among-others", "6", SMALL + ("data.batch_size=4,2,4",), BAD, "data.batch_size"),
    Case("misspelt-key", "8a", ("data.num_wrokers=2",), BAD, "data.num_wrokers"),
    Case("misspelt-top-level-key", "8a", ("repeat=3",), BAD, "repeat"),
    Case("unknown-top-level-key", "8a", ("foo=bar",), BAD, "foo"),
    Case("wrong-type-int", "8b", ("data.num_workers=abc",), BAD, "data.num_workers"),
    Case("wrong-type-bool", "8b", ("data.pin_memory=maybe",), BAD, "data.pin_memory"),
    Case("wrong-type-float-for-int", "8b", ("data.batch_size=2.5",), BAD, "data.batch_size"),
    Case("empty-value", "8c", ("data.num_workers=",), BAD, "data.num_workers"),
    Case("empty-resume", "audit", (QUICK, "resume="), BAD, "resume: is empty"),       # read as no resume: a new run
    Case("empty-resume-of-a-night", "audit", ("+sweep=overnight", "resume=", "dry_run=true"), BAD, "resume: is empty"),
    Case("empty-optional-text", "audit", (QUICK, "data.url=", "dry_run=true"), BAD, "data.url: is empty"),
    Case("null-for-required", "8c", ("repeats=null",), BAD, "repeats"),
    Case("unknown-sweep", "8d", ("+sweep=nosuch",), BAD, "sweep=nosuch"),
    Case("unknown-workload", "8e", ("workload=nosuch",), BAD, "workload=nosuch"),
    Case("override-without-value", "audit", ("data.batch_size",), BAD, "data.batch_size: no value"),
    Case("group-added-twice", "audit", ("+workload=dataloader",), BAD, "workload: chosen twice"),
    Case("delete-a-key", "audit", ("~data.url",), BAD, "data.url: ~ deletes a key"),
    Case("own-sweep-not-yaml", "audit", ("--config-dir", "{T}/conf", "+sweep=bad"), BAD,
         "bad.yaml: not valid YAML at line 2", setup=own_sweeps(bad="a: [1, 2\nb: :\n")),   # was "not a file sweeper wrote"
    Case("own-sweep-without-its-package", "audit", ("--config-dir", "{T}/conf", "+sweep=mine", "dry_run=true"), BAD,
         "puts its data: under sweep.data",                          # was: no such key in SweepMeta
         setup=own_sweeps(mine="data:\n  num_workers: 2\n")),
    Case("own-sweep-naming-no-config", "audit", ("--config-dir", "{T}/conf", "+sweep=mine", "dry_run=true"), BAD,
         "sweep/mine.yaml: its defaults list names nosuch",          # said "sweep=nosuch"
         setup=own_sweeps(mine="# @package _global_\ndefaults: [nosuch]\n")),
    Case("own-sweeps-in-a-cycle", "audit", ("--config-dir", "{T}/conf", "+sweep=a", "dry_run=true"), BAD,
         "the defaults lists of sweep/a, sweep/b name each other",   # RecursionError: 70
         setup=own_sweeps(a=in_a_cycle("a", "b"), b=in_a_cycle("b", "a"))),
    Case("timeout-past-select", "audit", (QUICK, "resources.timeout_s=1e10", "dry_run=true"), BAD,
         "resources.timeout_s: must be positive and at most 604,800 s"),     # every Ray trial an OverflowError
    Case("grid-trailing-comma", "audit", ("data.batch_size=8,",), BAD, "data.batch_size: the value ends with a comma"),
    Case("grid-of-an-interval", "audit", ("data.batch_size=interval(1,2)",), BAD, "interval(): not a grid"),
    Case("sweep-chosen-twice", "audit", ("+sweep=dataloader", "+sweep=zero"), BAD, "sweep: chosen twice"),
    Case("append-to-existing-key", "8", ("+data.num_workers=3",), BAD, "data.num_workers"),
    Case("unknown-executor", "8", ("executor=nonsense",), BAD, "executor"),
    Case("wrong-type-in-one-grid-value", "8b", ("data.num_workers=1,abc",), BAD, "data.num_workers"),
    Case("grid-and-unknown-key", "8", ("data.num_workers=0,2", "data.nope=1"), BAD, "data.nope"),   # not "Ambiguous value"
    Case("unknown-data-kind", "8", ("data.kind=video",), BAD, "data.kind"),
    Case("unknown-metric", "8", ("analysis.metric=p99",), BAD, "analysis.metric"),
    Case("prefetch-without-workers", "intro", ("data.num_workers=0", "data.prefetch_factor=2"), BAD,
         "data.prefetch_factor"),
    Case("negative-batch-size", "intro", ("data.batch_size=-4",), BAD, "data.batch_size"),
    Case("zero-repeats", "intro", ("repeats=0",), BAD, "repeats"),
    Case("repeats-neither-number-nor-auto", "21", ("repeats=often",), BAD, "repeats"),
    Case("adaptive-is-gone", "21", ("adaptive.enabled=true",), BAD, "adaptive"),
    Case("sequential-max-below-two", "21", ("repeats=auto", "sequential.max_repeats=1"), BAD, "sequential.max_repeats"),
    Case("unknown-spending", "21", ("repeats=auto", "sequential.spending=linear"), BAD, "sequential.spending"),
    Case("repeats-auto-on-every-device", "21", ("repeats=auto", "resources.every_device=true"), BAD, "repeats=auto"),
    Case("target-raises-at-import", "9a", ("workload.target=badimport_mod:run",), BAD, "workload.target",
         setup=with_module("badimport_mod", files.RAISES_AT_IMPORT)),
    Case("target-syntax-error", "9a", ("workload.target=badsyntax_mod:run",), BAD, "workload.target",
         setup=with_module("badsyntax_mod", files.SYNTAX_ERROR)),
    Case("target-not-callable", "10a", ("workload.target=notcallable_mod:run",), BAD, "workload.target",
         setup=with_module("notcallable_mod", files.NOT_CALLABLE)),
    Case("target-missing-function", "10b", ("workload.target=tests.workloads_for_tests:nosuch",), BAD,
         "workload.target"),
    Case("target-missing-module", "intro", ("workload.target=nosuch_module_xyz:run",), BAD, "workload.target"),
    Case("absurd-num-workers", "16a", SMALL + ("data.num_workers=100000", "dry_run=true"), BAD, "data.num_workers"),
    Case("unknown-workload-param", "16b", ("+workload.params.bogus=1",), BAD, "workload.params.bogus"),
    Case("wandb-dir-unwritable", "16c", (QUICK, "wandb.enabled=true", "wandb.dir=/proc/sweeper-wandb"), BAD, "wandb.dir"),
    Case("wandb-project-with-slash", "16c", (QUICK, "wandb.enabled=true", "wandb.project=a/b"), BAD, "wandb.project"),
    Case("ray-address-not-an-address", "15", (QUICK, "ray.address=http://head"), BAD, "ray.address"),
    Case("ray-address-nothing-listens", "15", (QUICK, "executor=ray", "ray.address=127.0.0.1:9"), BAD, "ray.address"),
    Case("memory-limit-in-process", "audit", (QUICK, "executor=local", "resources.memory_limit_gb=0.5"), BAD,
         "resources.memory_limit_gb: caps a trial's own process"),       # capped the driver for good
    Case("memory-limit-infinite", "intro", (QUICK, "resources.memory_limit_gb=inf"), BAD, "resources.memory_limit_gb"),
    Case("seed-past-64-bits", "intro", (QUICK, "workload.seed=99999999999999999999"), BAD, "workload.seed"),
    Case("seed-negative", "intro", (QUICK, "workload.seed=-5"), BAD, "workload.seed"),
    Case("absurd-threads", "16a", (QUICK, "workload.threads=100000", "dry_run=true"), BAD, "workload.threads"),
    Case("absurd-world-size", "16a", ("workload=train_step", "train.world_size=100000", "dry_run=true"), BAD, "train.world_size"),
    Case("ray-runtime-env-refused", "intro", (QUICK, "executor=ray", "+ray.runtime_env={env_vars:{A:1}}"), BAD, "ray.runtime_env"),
    Case("ray-node-ip-not-an-ip", "audit", (QUICK, "executor=ray", "ray.node_ip_address=not-an-ip"), BAD,
         "ray.node_ip_address: must be one of this host's IP addresses"),   # Ray retried it for minutes
    Case("ray-node-ip-of-another-machine", "audit", (QUICK, "executor=ray", "ray.node_ip_address=192.0.2.7"), BAD,
         "ray.node_ip_address: 192.0.2.7 is not an address of this machine"),
    Case("ray-cpus-negative", "intro", (QUICK, "executor=ray", "ray.num_cpus=-1"), BAD, "ray.num_cpus"),
    # planning these filled memory, spun for minutes, or ended in a traceback
    Case("absurd-repeats", "audit", (QUICK, "repeats=1000000000", "dry_run=true"), BAD, "repeats: must be 1 to 10000"),
    Case("absurd-max-repeats", "audit", (QUICK, "repeats=auto", "sequential.max_repeats=1000000000", "dry_run=true"),
         BAD, "sequential.max_repeats"),
    Case("absurd-ray-cpus", "audit", (QUICK, "ray.num_cpus=100000"), BAD, "ray.num_cpus: must be 0 to 1024"),
    Case("absurd-grid", "audit", (QUICK, "data.batch_size=range(1,3000000)", "dry_run=true"), BAD,
         "data.batch_size: makes the grid more than 100,000 points"),
    Case("grid-of-an-empty-range", "audit", (QUICK, "data.num_workers=range(5,1)", "dry_run=true"), BAD,
         "data.num_workers: gives no value"),
    Case("grid-range-step-zero", "audit", (QUICK, "data.num_workers=range(0,4,0)", "dry_run=true"), BAD,
         "data.num_workers: range() arg 3 must not be zero"),
    Case("grid-of-hydras-own-key", "audit", (QUICK, "hydra.sweeper.params.data.batch_size=1,2", "dry_run=true"), BAD,
         "hydra.sweeper.params.data.batch_size: Hydra's own settings take one value"),     # was a garbled line
    Case("max-batch-size-zero", "audit", (QUICK, "hydra.sweeper.max_batch_size=0", "dry_run=true"), BAD,
         "hydra.sweeper.max_batch_size"),
    Case("sweeper-params-not-a-mapping", "audit", (QUICK, "hydra.sweeper.params=5", "dry_run=true"), BAD,
         "hydra.sweeper.params: must map dotted keys to values"),
]
