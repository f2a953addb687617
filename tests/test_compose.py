"""Composing a job from a template gives exactly what Hydra's own composition gives."""
import pytest
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from sweeper.config import register_configs
from hydra_plugins.sweeper_ray_launcher._compose import JobComposer
from tests.conftest import ROOT

JOBS = [
    ["+sweep=dataloader", "data.num_workers=1", "data.pin_memory=true"],
    ["+sweep=dataloader", "data.num_workers=4", "data.pin_memory=false"],
    ["+sweep=train_step", "train.precision=bf16", "train.accum_steps=2"],
    ["workload=train_step", "train.precision=fp32", "+workload.params.extra=3", "repeats=2"],
    ["data.num_workers=2", "hydra.job.name=other", "~analysis"],
]


@pytest.fixture(scope="module")
def loader_and_master():
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", overrides=["hydra.sweep.dir=/tmp/x"],
                                           run_mode=RunMode.MULTIRUN)
        yield loader, master


def _hydra_composes(loader, master, overrides, index):
    cfg = loader.load_sweep_config(master, list(overrides))
    with open_dict(cfg):
        cfg.hydra.job.num = index
    return cfg


def test_every_job_equals_hydras_own_composition(loader_and_master):
    loader, master = loader_and_master
    composer = JobComposer(loader, master)
    for index, overrides in enumerate(JOBS):
        ours = OmegaConf.to_container(composer.compose(overrides, index))
        theirs = OmegaConf.to_container(_hydra_composes(loader, master, overrides, index))
        assert ours == theirs, overrides
    assert len(composer.templates) == 4    # jobs 0 and 1 share their group choices


def test_a_misspelt_key_fails_as_in_hydra(loader_and_master):
    loader, master = loader_and_master
    with pytest.raises(ConfigCompositionException) as ours:
        JobComposer(loader, master).compose(["data.num_wokers=2"], 0)
    with pytest.raises(ConfigCompositionException) as theirs:
        loader.load_sweep_config(master, ["data.num_wokers=2"])
    assert str(ours.value) == str(theirs.value)



@pytest.mark.parametrize("overrides", [JOBS[0], JOBS[3], [], ["workload.target=benchmarks.gpu_busy:run"]])
def test_a_job_of_the_command_lines_own_overrides_is_the_multiruns_config(loader_and_master, overrides):
    """A sweep of one job: its config is the multirun's own, copied, with no composition of its own."""
    loader, _ = loader_and_master
    master = loader.load_configuration("config", overrides=["hydra.sweep.dir=/tmp/x", *overrides],
                                       run_mode=RunMode.MULTIRUN)
    task = OverridesParser.create().parse_overrides(list(master.hydra.overrides.task))
    job = BasicSweeper.split_arguments(task, None)[0][0]          # as Hydra's sweeper writes them: `\\:`, `True`
    composer = JobComposer(loader, master)
    ours = OmegaConf.to_container(composer.compose(job, 3))
    assert ours == OmegaConf.to_container(_hydra_composes(loader, master, job, 3))
    assert composer.templates == {}


def test_a_missing_config_group_fails_as_in_hydra(tmp_path):
    """The multirun's composition skips a group left `???`; the job's own must still say so."""
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "a.yaml").write_text("y: 2\n")
    (tmp_path / "config.yaml").write_text("defaults:\n  - grp: ???\n  - _self_\nx: 1\n")
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(tmp_path)))
    master = loader.load_configuration("config", overrides=[], run_mode=RunMode.MULTIRUN)
    with pytest.raises(ConfigCompositionException, match="You must specify 'grp'"):
        JobComposer(loader, master).compose([], 0)
