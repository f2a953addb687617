"""The bad-input cases of Hydra's own flags and the command line itself: one line, before Hydra runs or writes
anything."""
from tests.bad_input_base import BAD, OK, QUICK, Case, no_run_folder, with_file

CASES = [
    Case("unparsable-override", "8", ("data.batch_size=[1,2",), BAD, "data.batch_size"),
    Case("another-hydra-launcher", "8", (QUICK, "hydra/launcher=basic", "data.batch_size=2,4"), BAD, "hydra/launcher"),
    Case("hydra-run-mode", "4b, 8", (QUICK, "hydra.mode=RUN", "+workload.params.api_token=SECRET-run-5512"), BAD,
         "hydra.mode", secret="SECRET-run-5512"),        # Hydra's RUN mode wrote a folder with it, then was refused
    Case("another-hydra-sweeper", "4b, 8", (QUICK, "hydra/sweeper=basic", "+workload.params.api_token=SECRET-swp-2208"),
         BAD, "hydra/sweeper", secret="SECRET-swp-2208"),  # BasicSweeper wrote multirun.yaml with it, then ran
    Case("unknown-flag", "8", ("--bogus",), BAD, "--bogus"),
    Case("multirun-flag-after-overrides", "8", (QUICK, "-m", "data.batch_size=2,4"), BAD, "data.batch_size=2,4"),
    Case("hydra-rerun-flag", "8", ("--experimental-rerun", "{T}/job.pickle"), BAD, "--experimental-rerun"),
    Case("shell-completion-bare", "8", ("--shell-completion",), BAD, "--shell-completion"),
    Case("hydra-help-with-overrides", "audit", ("--hydra-help",), OK, lines=0),   # composed without our keys
    Case("hydra-key-unknown", "audit", ("hydra.nosuch=1",), BAD, "hydra.nosuch: no such key in HydraConf; python -m "
         "sweeper --cfg hydra"),
    Case("price-mapping-without-plus", "audit", ("cost.gpu_hour_usd={H200:3.5}",), BAD,   # as config.yaml's comment had it
         "cost.gpu_hour_usd.H200: no such key in dict; a key of your own in a mapping is added with a leading +: "
         "'+cost.gpu_hour_usd.H200=...'"),
    Case("cfg-package-unknown", "audit", ("--cfg", "job", "--package", "nosuch"), BAD, "--package nosuch"),
    Case("package-without-cfg", "audit", ("--package", "data"), BAD, "--package data", check=no_run_folder),
    Case("resolve-without-cfg", "audit", ("--resolve",), BAD, "--resolve"),
    Case("shell-completion-query-outside-a-shell", "audit", ("--shell-completion", "query=bash"), BAD,
         "--shell-completion query=bash"),
    Case("shell-completion-unknown-shell", "audit", ("--shell-completion", "install=tcsh"), BAD,
         "--shell-completion install=tcsh"),
    Case("shell-completion-two-commands", "audit", ("--shell-completion", "install=bash", "uninstall=bash"), BAD,
         "--shell-completion"),
    Case("config-name-empty", "audit", ("--config-name=",), BAD, "--config-name: is empty"),
    Case("config-dir-a-file", "audit", ("--config-dir", "{T}/afile"), BAD, "--config-dir", setup=with_file("afile")),
    Case("searchpath-not-there", "audit", ("hydra.searchpath=[file://{T}/nope]",), BAD, "hydra.searchpath"),
    Case("unknown-config-name", "8", ("--config-name=nosuch",), BAD, "nosuch"),
    Case("config-name-a-path", "audit", ("--config-name=../../y",), BAD, "--config-name ../../y: a config's name, not a path"),
    Case("sweep-choice-a-path", "audit", ("+sweep=../../../../etc/x", "dry_run=true"), BAD,
         "sweep=../../../../etc/x: a config group takes a config's name"),    # loaded any YAML file
    Case("workload-choice-a-number", "audit", ("workload=1", "dry_run=true"), BAD,
         "workload=1: a config group takes a config's name"),                 # was a ValueError, exit 70
    Case("override-without-key", "audit", ("=1",), BAD, "=1: no key"),
]
