"""Planning is pure: each rule as a table of cases."""
import pytest

from sweeper.errors import ConfigError
from sweeper.plan import ClusterShape, cell_id, expand_repeats, plan_cells, plan_trials, request, swept_keys
from sweeper.schema import DataConfig, ResourcesConfig, TrialConfig, root_config_from_dict
from workloads.specs import DATALOADER

LAPTOP = ClusterShape(node_cpus=[2.0], node_gpus=[0.0])
GPU_BOX = ClusterShape(node_cpus=[16.0], node_gpus=[2.0])
MIXED = ClusterShape(node_cpus=[8.0, 32.0], node_gpus=[0.0, 4.0])


def cfg(num_workers=0, isolation="node", gpus=None, cpus=None, **data):
    return TrialConfig(data=DataConfig(num_workers=num_workers, **data),
                       resources=ResourcesConfig(isolation=isolation, gpus=gpus, cpus=cpus))


@pytest.mark.parametrize("config, cluster, expected", [
    (cfg(8, "pack"), LAPTOP, (2.0, 0.0)),          # capped at one node, so a laptop still runs it
    (cfg(0, "pack"), LAPTOP, (1.0, 0.0)),
    (cfg(0, "node"), LAPTOP, (2.0, 0.0)),          # node isolation takes the whole node
    (cfg(2, "node"), GPU_BOX, (16.0, 1.0)),        # a GPU by default where the cluster has one
    (cfg(2, "gpu"), GPU_BOX, (3.0, 1.0)),
    (cfg(2, "gpu", gpus=0.5), GPU_BOX, (3.0, 1.0)),  # one per GPU: whole GPUs only
    (cfg(2, "pack", gpus=0.5), GPU_BOX, (3.0, 0.5)),
    (cfg(1, "pack", cpus=6), GPU_BOX, (6.0, 1.0)),
    (cfg(64, "pack"), MIXED, (32.0, 1.0)),
    (cfg(0, "node"), MIXED, (8.0, 1.0)),           # the smallest node's CPUs
])
def test_request(config, cluster, expected):
    assert request(config, DATALOADER.resources(config), cluster) == expected


def test_infeasible_gpu_request_is_named_before_submission():
    trial = plan_cells([(["resources.gpus=4"], cfg(gpus=4))], GPU_BOX)[0]
    assert trial.infeasible == "asks for 4 GPU(s) but no node has more than 2"


def test_cell_id_is_stable_and_ignores_paths_and_time_limits():
    a = cfg(2, cache_dir="/tmp/a")
    b = cfg(2, cache_dir="/elsewhere")
    b.resources.timeout_s = 5
    assert cell_id(a, "dataloader") == cell_id(b, "dataloader") == cell_id(cfg(2, cache_dir="/tmp/a"), "dataloader")
    assert cell_id(cfg(4), "dataloader") != cell_id(a, "dataloader")
    assert cell_id(a, "other") != cell_id(a, "dataloader")          # the workload is part of what is measured
    assert len(cell_id(a, "dataloader")) == 12


# Ids of existing cells, pinned: history keys its series by cell id, so a change in how ids are
# derived (the key roles, a new section) must not rename any of these.
@pytest.mark.parametrize("values, pinned", [
    ({}, "7eba7634904e"),
    ({"data": {"num_workers": 4, "pin_memory": True}}, "581d36c2cd2f"),
    ({"resources": {"isolation": "pack", "cpus": 4}}, "e28eeb79af20"),
    ({"resources": {"gpus": 1}}, "b6a73113c558"),
    ({"probe": {"settle": True}}, "ca7170b0a072"),
    ({"data": {"cache_dir": "/x"}, "resources": {"timeout_s": 5, "max_retries": 2}}, "7eba7634904e"),
    ({"workload": {"params": {"a": 1}, "target": "tests.workloads_for_tests:sleepy"}}, "f63253545517"),
    ({"workload": {"target": "workloads.train_step:run", "spec": "workloads.specs:TRAIN_STEP"},
      "train": {"precision": "bf16", "dist_timeout_s": 10}}, "f9fff60fdc33"),
    ({"workload": {"target": "workloads.dataloader:run", "spec": "workloads.specs:DATALOADER"},
      "data": {"prefetch_factor": 2, "num_workers": 2}}, "44e5a36c2cac"),
])
def test_existing_cell_ids_stay_pinned(values, pinned):
    root = root_config_from_dict(values)
    assert plan_cells([([], root)], LAPTOP)[0].cell_id == pinned


@pytest.mark.parametrize("overrides, expected", [
    ([["data.num_workers=1", "+sweep=x"], ["data.num_workers=2", "+sweep=x"]], ["data.num_workers"]),
    ([["data.num_workers=1", "data.pin_memory=true"]], ["data.num_workers", "data.pin_memory"]),
    ([["data.a=1", "data.b=1"], ["data.a=1", "data.b=2"]], ["data.b"]),
    ([["dry_run=true"]], []),
    # one cell: only what it measures, not where it goes or how the run is named
    ([["history.enabled=false", "report.enabled=false", "sweep.name=one", "wandb.enabled=false",
       "data.batch_size=8", "resources.timeout_s=60", "+workload.params.n=3"]], ["data.batch_size", "workload.params.n"]),
    ([["sequential.max_repeats=4", "data.num_workers=1"], ["sequential.max_repeats=4", "data.num_workers=2"]],
     ["data.num_workers"]),
])
def test_swept_keys(overrides, expected):
    assert swept_keys(overrides) == expected


def grid(values=(0, 1, 2)):
    return [([f"data.num_workers={v}"], cfg(v, "pack")) for v in values]


def test_baseline_is_the_grid_point_nearest_the_defaults():
    trials = plan_trials(grid((4, 2, 0)), LAPTOP)
    assert [t.is_baseline for t in trials] == [False, False, True]


def test_named_baseline_and_unknown_baseline():
    trials = plan_trials(grid(), LAPTOP, baseline="data.num_workers=2")
    assert [t.swept["data.num_workers"] for t in trials if t.is_baseline] == [2]
    with pytest.raises(ConfigError, match="analysis.baseline"):
        plan_trials(grid(), LAPTOP, baseline="data.num_workers=7")


def test_repeats_interleave_and_double_the_baseline():
    trials = plan_trials(grid(), LAPTOP, repeats=3, order="interleaved", seed=1)
    per_cell = {}
    for t in trials:
        per_cell.setdefault(t.cell_id, []).append(t.repeat)
    counts = sorted(len(v) for v in per_cell.values())
    assert counts == [3, 3, 6]
    assert len({t.trial_id for t in trials}) == len(trials) == 12
    # rounds: every cell appears once (baseline twice) in each block of four
    for r in range(3):
        block = trials[4 * r:4 * r + 4]
        assert len({t.cell_id for t in block}) == 3
    again = plan_trials(grid(), LAPTOP, repeats=3, order="interleaved", seed=1)
    assert [t.trial_id for t in again] == [t.trial_id for t in trials]


def test_grid_order_keeps_cells_together():
    cells = plan_cells(grid(), LAPTOP)
    trials = expand_repeats(cells, 2, baseline=0, double_baseline=False, order="grid")
    assert [t.trial_id for t in trials] == [f"{c.cell_id}-{r}" for c in cells for r in range(2)]


def test_a_one_cell_plan_shows_only_measurement_settings():
    overrides = ["history.enabled=false", "report.enabled=false", "sweep.name=one", "wandb.enabled=false",
                 "data.num_workers=1"]
    trial = plan_cells([(overrides, cfg(1))], LAPTOP)[0]
    assert trial.swept == {"data.num_workers": 1}


@pytest.mark.parametrize("jobs, message", [
    # data.num_workers=1,1: the second would silently replace the first
    ([["data.num_workers=1"], ["data.num_workers=1"]],
     r"^data\.num_workers=1: this grid point is listed twice.*give each value once"),
    # an output setting as an axis: two points, one cell
    ([["data.num_workers=1", "wandb.enabled=true"], ["data.num_workers=1", "wandb.enabled=false"]],
     r"^wandb\.enabled: the values true and false make one cell, since wandb\.enabled is an output setting"),
    ([["data.num_workers=1", "resources.timeout_s=10"], ["data.num_workers=1", "resources.timeout_s=20"]],
     r"^resources\.timeout_s: the values 10 and 20 make one cell, since .* placement setting, not a measurement"),
    # two spellings of one value
    ([["data.num_workers=1"], ["data.num_workers=01"]], r"^data\.num_workers: the values 1 and 01 are one setting"),
])
def test_a_duplicate_grid_point_is_refused_naming_key_and_value(jobs, message):
    planned = [(overrides, cfg(1)) for overrides in jobs]
    with pytest.raises(ConfigError, match=message):
        plan_cells(planned, LAPTOP)
    assert len(plan_cells([(["data.num_workers=1"], cfg(1)), (["data.num_workers=2"], cfg(2))], LAPTOP)) == 2
