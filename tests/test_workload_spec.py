"""Workload specs: a new workload is one module and one config file; cell ids survive the tool's growth."""
import dataclasses
import re
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from sweeper.errors import ConfigError
from sweeper.plan import ClusterShape, plan_trials, shrunk
from sweeper.schema import DataConfig, TrainConfig, root_config_from_dict, trial_config
from sweeper.spec import DEFAULT_SPEC, spec_for
from tests.conftest import ROOT

LAPTOP = ClusterShape(node_cpus=[2.0], node_gpus=[0.0])


def dataloader_grid():
    jobs = []
    for workers in (1, 2, 4):
        for pin in (False, True):
            overrides = [f"data.num_workers={workers}", f"data.pin_memory={pin}"]
            values = {"workload": {"target": "workloads.dataloader:run", "spec": "workloads.specs:DATALOADER"},
                      "data": {"num_workers": workers, "pin_memory": pin, "prefetch_factor": 2}}
            jobs.append((overrides, root_config_from_dict(values)))
    return jobs


def test_a_new_key_with_a_default_leaves_every_cell_id_alone(monkeypatch):
    before = [t.cell_id for t in plan_trials(dataloader_grid(), LAPTOP)]
    grown = dataclasses.make_dataclass("DataConfig", [("readahead_mb", int, dataclasses.field(default=64))],
                                       bases=(DataConfig,))
    monkeypatch.setattr("sweeper.schema.DataConfig", grown)
    jobs = []
    for overrides, root in dataloader_grid():
        fields = {f.name: getattr(root.data, f.name) for f in dataclasses.fields(root.data)}   # nested sections kept
        root.data = grown(**fields)                                  # the tool gained data.readahead_mb
        jobs.append((overrides, root))
    assert all(isinstance(root.data, grown) for _, root in jobs)
    assert [t.cell_id for t in plan_trials(jobs, LAPTOP)] == before
    jobs[0][1].data.readahead_mb = 128                               # ... and a cell that sets it is another cell
    assert plan_trials(jobs, LAPTOP)[0].cell_id not in before


def test_a_section_the_workload_does_not_use_is_not_in_its_config_or_id():
    jobs = dataloader_grid()
    before = [t.cell_id for t in plan_trials(jobs, LAPTOP)]
    for _, root in jobs:
        root.train = TrainConfig(precision="bf16", micro_batch=64)    # the train section changed
    trials = plan_trials(jobs, LAPTOP)
    assert [t.cell_id for t in trials] == before
    assert all(t.config.train is None and t.config.data is not None for t in trials)


def test_spec_rules_come_from_the_workload():
    root = root_config_from_dict({"workload": {"target": "workloads.train_step:run",
                                               "spec": "workloads.specs:TRAIN_STEP"},
                                  "train": {"world_size": 2, "micro_batch": 8, "accum_steps": 1},
                                  "data": {"num_workers": 1}, "resources": {"isolation": "pack"}})
    trial = plan_trials([(["train.world_size=2"], root)], ClusterShape([16.0], [4.0]))[0]
    assert (trial.num_cpus, trial.num_gpus) == (4.0, 2.0)             # (workers + 1) x ranks, a GPU per rank
    smaller = shrunk(trial)
    assert (smaller.config.train.micro_batch, smaller.config.train.accum_steps) == (4, 2)
    assert smaller.overrides[-2:] == ["train.micro_batch=4", "train.accum_steps=2"]
    assert smaller.cell_id != trial.cell_id


def test_overriding_the_target_drops_the_group_spec():
    root = root_config_from_dict({"workload": {"target": "tests.workloads_for_tests:quick",
                                               "spec": "workloads.specs:DATALOADER"}})
    assert spec_for(root.workload) is DEFAULT_SPEC
    assert trial_config(root, DEFAULT_SPEC.sections).train is None


TOY_MODULE = '''
"""A toy workload: one module with its function and its spec."""
import time
from dataclasses import dataclass

from sweeper.errors import ConfigError
from sweeper.spec import Wants, WorkloadSpec


@dataclass
class ToyParams:
    size: int = 1
    sleep_ms: float = 1.0

    def check(self):
        if self.size < 1:
            raise ConfigError(f"workload.params.size: must be 1 or more, got {self.size}")


def run(cfg, probe):
    for _ in range(cfg.workload.warmup_steps + cfg.workload.steps):
        with probe.step(items=cfg.workload.params["size"]):
            time.sleep(cfg.workload.params["sleep_ms"] / 1e3)
    return {"toy_score": 10.0 * cfg.workload.params["size"]}


SPEC = WorkloadSpec(name="toy", params=ToyParams, resources=lambda cfg: Wants(cpus=1.0, gpus=0.0),
                    preload=("json",), items_label="widgets",
                    headline=(("toy_score", "toy score", 1.0, 1),))
'''

TOY_CONFIG = '''
# the toy workload: `workload=toy`
target: toyload:run
steps: 5
warmup_steps: 1
params:
  size: 1
  sleep_ms: 1.0
'''


@pytest.fixture
def toy_folder(tmp_path):
    (tmp_path / "toyload.py").write_text(textwrap.dedent(TOY_MODULE))
    (tmp_path / "conf" / "workload").mkdir(parents=True)
    (tmp_path / "conf" / "workload" / "toy.yaml").write_text(TOY_CONFIG)
    return tmp_path


def run_in(folder, *args):
    env_path = f"{folder}:{ROOT}"
    cmd = [sys.executable, "-m", "sweeper", "workload=toy", f"results_dir={folder / 'results'}",
           "wandb.enabled=false", "report.enabled=false", *args]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": env_path, "HOME": str(folder)})


@pytest.mark.slow
def test_a_toy_workload_is_one_module_and_one_config(toy_folder):
    # executor=local: a local Ray would start while the plan is checked (tests/test_cli.py has that case)
    bad = run_in(toy_folder, "workload.params.size=0", "executor=local")
    assert bad.returncode == 2 and "workload.params.size: must be 1 or more" in bad.stderr
    unknown = run_in(toy_folder, "+workload.params.colour=red", "executor=local")
    assert unknown.returncode == 2 and "workload.params.colour: unknown key" in unknown.stderr

    result = run_in(toy_folder, "workload.params.size=1,3", "executor=local")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "widgets/s" in result.stdout and "toy score" in result.stdout
    assert [p.name for p in (toy_folder / "results" / "single").iterdir()] == [run.name for run in
            (toy_folder / "results" / "single").iterdir() if (run / "summary.parquet").exists()]  # bad input left no folder
    run = next((toy_folder / "results" / "single").iterdir())
    summary = pd.read_parquet(run / "summary.parquet")
    assert set(summary["workload"]) == {"toy"}
    assert sorted(summary["toy_score"]) == [10.0, 30.0]
    assert sorted(summary["workload.params.size"]) == [1, 3]


# -- what a target must be, found before any trial ---------------------------------------
@pytest.mark.parametrize("source, target, message", [
    ("def run(cfg, probe):\n    return {}\n", "{m}:missing",
     r"^workload\.target='{m}:missing': module '{m}' has no 'missing'; name one of its functions"),
    ("run = 3\n", "{m}:run", r"^workload\.target='{m}:run': 'run' is a int, not a function"),
    ("def run(cfg, probe)\n    return {}\n", "{m}:run",
     r"^workload\.target='{m}:run': importing '{m}' raised SyntaxError: .*; fix the module"),
    ("raise RuntimeError('no GPU\\nhere')\n", "{m}:run",
     r"^workload\.target='{m}:run': importing '{m}' raised RuntimeError: no GPU here; fix the module"),
    ("import no_such_module_anywhere\n", "{m}:run", r"^workload\.target='{m}:run': cannot import '{m}'"),
], ids=["missing", "not_callable", "syntax", "raises", "import_error"])
def test_a_bad_target_is_one_line_before_any_trial(source, target, message, tmp_path, monkeypatch, request):
    module = f"bad_target_{request.node.callspec.id}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    root = root_config_from_dict({"workload": {"target": target.format(m=module)}})
    with pytest.raises(ConfigError) as err:
        plan_trials([([], root)], LAPTOP)
    assert re.match(message.format(m=re.escape(module)), str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("workload", ["dataloader", "train_step"])
def test_a_shipped_workload_refuses_params_it_does_not_read(workload):
    root = root_config_from_dict({"workload": {"target": f"workloads.{workload}:run",
                                               "spec": f"workloads.specs:{workload.upper()}",
                                               "params": {"api_token": "x"}}})
    with pytest.raises(ConfigError, match=r"^workload\.params\.api_token: this workload reads no workload\.params"):
        plan_trials([([], root)], LAPTOP)
    root.workload.params = {}
    assert len(plan_trials([([], root)], LAPTOP)) == 1


def test_a_target_its_spec_describes_must_be_findable_though_it_is_not_imported(tmp_path, monkeypatch):
    (tmp_path / "spec_only_here.py").write_text(
        "from sweeper.spec import WorkloadSpec\nSPEC = WorkloadSpec(name='ghost', target='ghost_module:run')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    root = root_config_from_dict({"workload": {"target": "ghost_module:run", "spec": "spec_only_here:SPEC"}})
    with pytest.raises(ConfigError, match=r"^workload\.target='ghost_module:run': no module 'ghost_module' on the path"):
        plan_trials([([], root)], LAPTOP)
