"""`python -m sweeper [+sweep=NAME] [key=value ...]`: parse, compose, launch, exit.

The heavy lifting happens in the launcher plugin (hydra_plugins/sweeper_ray_launcher),
which imports Ray only when it launches; `--help` and config errors stay fast.
"""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from sweeper import exitcodes
from sweeper.config import register_configs

CONF_DIR = str(Path(__file__).resolve().parent / "conf")   # shipped in the wheel as package data


def run_in_process(cfg: DictConfig) -> None:
    """Hydra's task function, used only with another launcher (hydra/launcher=basic):
    the trial still runs in a forked process of its own, just without Ray."""
    from sweeper.isolation import shared_host
    from sweeper.plan import plan_trials, ClusterShape
    from sweeper.results import run_dir, write_trial
    from sweeper.schema import root_config_from_dict

    from hydra.core.hydra_config import HydraConfig

    values = OmegaConf.to_container(cfg, resolve=True)
    root = root_config_from_dict(values)
    overrides = list(HydraConfig.get().overrides.task)
    trial = plan_trials([(overrides, root)], ClusterShape([1.0], [0.0]))[0]
    outcome = shared_host().run(trial.spec(root.sweep.name, root.run_id), root.resources.timeout_s, {})
    path = write_trial(run_dir(root.results_dir, root.sweep.name, root.run_id), outcome.record, values,
                       outcome.files)
    print(f"{outcome.record['status']}: {path}")


_hydra_main = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")(run_in_process)


def quote_shard_patterns(argv: list) -> list:
    """`data.url=/d/train-{0000..0099}.tar` as users write it for webdataset; Hydra's
    override grammar would read the braces as a dict, so quote such a value for it."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+") == "data.url" and "{" in value and value[:1] not in "'\"":
            arg = f"{key}='{value}'"
        out.append(arg)
    return out


def main() -> None:
    sys.argv = quote_shard_patterns(sys.argv)
    register_configs()
    _hydra_main()
    sys.exit(exitcodes.code())


if __name__ == "__main__":
    main()
