"""Planning is pure: each rule as a table of cases."""
import pytest

from sweeper.errors import ConfigError
from sweeper.plan import ClusterShape, cell_id, expand_repeats, plan_cells, plan_trials, request, swept_keys
from sweeper.schema import DataConfig, ResourcesConfig, TrialConfig
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


@pytest.mark.parametrize("overrides, expected", [
    ([["data.num_workers=1", "+sweep=x"], ["data.num_workers=2", "+sweep=x"]], ["data.num_workers"]),
    ([["data.num_workers=1", "data.pin_memory=true"]], ["data.num_workers", "data.pin_memory"]),
    ([["data.a=1", "data.b=1"], ["data.a=1", "data.b=2"]], ["data.b"]),
    ([["dry_run=true"]], []),
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
