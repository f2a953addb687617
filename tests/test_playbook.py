"""The playbook's microbenchmarks: each runs as a trial through one real sweep
(`+sweep=playbook`, CPU sizes) and returns finite figures that relate as they must."""
import math

import pandas as pd
import pytest
import torch

from sweeper.analysis.model import ALONE
from sweeper.analysis.run import analyze_run, run_analysis_config
from sweeper.errors import ConfigError
from sweeper.probe import Probe
from sweeper.results import read_records
from sweeper.schema import AnalysisConfig, TrialConfig, WorkloadConfig
from sweeper.spec import typed_params
from tests.conftest import run_sweeper
from workloads.playbook import specs

WORKLOADS = ("h2d_copy", "dataset_access", "loader_startup", "forward_timing", "allocator_warmup")


@pytest.fixture(scope="module")
def playbook(tmp_path_factory):
    """One real sweep over all five (in-process trials: Ray would add only its start-up here).
    One torch thread: two OpenMP threads on a shared 2-core machine spin, and a training step
    of the allocator trial took 4.7 s instead of 0.4 s."""
    tmp = tmp_path_factory.mktemp("playbook")
    result = run_sweeper(["+sweep=playbook", "executor=local", "workload.threads=1", "report.enabled=false"], tmp)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = next((tmp / "results" / "playbook").iterdir())
    records = {r["workload_spec"]["name"]: r for r in read_records(run)}
    return result.stdout, run, records


def figures(records, name):
    return records[name]["figures"]


@pytest.mark.slow
def test_every_microbenchmark_records_each_figure_its_spec_declares(playbook):
    """The spec names figures (headline columns, the pair it compares); the workload must
    record each one, finite, or a view shows "-" and the pair line is missing."""
    _, _, records = playbook
    assert sorted(records) == sorted(WORKLOADS)
    for name, record in records.items():
        assert record["status"] == "ok", (name, record.get("error_message"))
        spec = record["workload_spec"]
        assert spec["pairs"], name                         # every microbenchmark compares something
        declared = [h[0] for h in spec["headline"]] + [k for p in spec["pairs"] for k in (p[1], p[3])]
        for key in declared:
            assert isinstance(record["figures"].get(key), (int, float)), (name, key)
            assert math.isfinite(record["figures"][key]) and record["figures"][key] >= 0, (name, key)


@pytest.mark.slow
def test_copy_on_a_cpu_is_a_host_memcpy_and_says_so(playbook):
    _, _, records = playbook
    copy = figures(records, "h2d_copy")
    assert copy["copy_kind"] == "host_to_host" and copy["pinned_effective"] is False
    assert any("host memcpy" in w for w in records["h2d_copy"]["warnings"])
    assert copy["size_mb"] == 8.0                                   # auto: the CPU size
    assert copy["pinned_gbps"] == copy["copy_gbps"] and copy["pageable_gbps"] > 0   # the steps were "pinned"
    # the spec's pair names the figures the workload's own speedup is of: the analysis' ratio,
    # from the raw figures, is the trial's pinned_speedup (a pair naming the wrong keys is not)
    _, analysis = analyze_run(playbook[1], run_analysis_config(playbook[1]))
    pair = next(p for p in analysis.pairs if p.workload == "h2d_copy")
    assert (pair.a, pair.b) == ("pinned", "pageable") and pair.ratio == pytest.approx(copy["pinned_speedup"])
    assert 0.0 <= copy["overlap_share"] <= 1.0
    assert min(copy["overlap_copy_ms"], copy["overlap_matmul_ms"], copy["overlap_both_ms"]) > 0


@pytest.mark.slow
def test_an_arrow_column_is_slower_per_access_than_numpy_and_a_list(playbook):
    access = figures(playbook[2], "dataset_access")
    assert access["access_ms_numpy"] < access["access_ms_arrow"]
    assert access["access_ms_list"] < access["access_ms_arrow"] and access["arrow_over_list"] > 1


@pytest.mark.slow
def test_persistent_workers_make_later_epochs_start_cheaper(playbook):
    startup = figures(playbook[2], "loader_startup")
    assert startup["startup_later_persistent_s"] < startup["startup_later_fresh_s"]
    assert startup["startup_first_s"] > startup["startup_later_s"]      # only epoch 0 started workers
    assert startup["worker_start_s"] > 0
    assert [k for k in startup if k.startswith("startup_epoch")] == ["startup_epoch0_s", "startup_epoch1_s",
                                                                     "startup_epoch2_s"]


@pytest.mark.slow
def test_a_larger_batch_shape_takes_longer_to_forward(playbook):
    forward = figures(playbook[2], "forward_timing")
    assert forward["forward_ms_b16_t64"] > forward["forward_ms_b1_t16"]
    assert forward["tokens_per_s"] == pytest.approx(forward["batch"] * forward["seq_len"] / forward["forward_ms"] * 1e3)


@pytest.mark.slow
def test_loading_weights_shows_in_the_host_peak_both_ways(playbook):
    alloc = figures(playbook[2], "allocator_warmup")
    assert alloc["memory_kind"] == "host_rss"
    for way in ("warm", "cold"):     # each way in a clean process: the weights, not one-time costs or the other way
        assert 0.5 * alloc["weights_mb"] < alloc[f"load_peak_mb_{way}"] < 3 * alloc["weights_mb"], alloc
        assert alloc[f"step_peak_mb_{way}"] > 0
    assert 0.5 * alloc["weights_mb"] < alloc["load_peak_mb"] < 3 * alloc["weights_mb"], alloc


@pytest.mark.slow
def test_the_real_playbook_ends_with_each_microbenchmarks_pair(playbook):
    stdout, run, _ = playbook
    _, analysis = analyze_run(run, run_analysis_config(run))
    assert sorted(analysis.cells["cell"]) == sorted(f"workload={w}" for w in WORKLOADS)
    assert analysis.strata_keys == ("workload",) and analysis.baselines == {}
    story = stdout[stdout.index("each microbenchmark's own comparison"):].splitlines()[1:6]
    assert sorted(line.split(":")[0].strip() for line in story) == sorted(f"workload={w}" for w in WORKLOADS)
    assert all(" vs " in line and line.endswith("x") for line in story), story
    assert ALONE not in stdout and "noise floor" not in stdout and "recommend" not in stdout


# --------------------------------------------------------------------------- the playbook's story, in process

PAIR_FIGURES = {"h2d_copy": {"pinned_gbps": 12.0, "pageable_gbps": 4.0},                      # 3x
                "dataset_access": {"access_ms_arrow": 0.5, "access_ms_numpy": 0.005, "access_ms_list": 0.0025},
                "loader_startup": {"startup_later_fresh_s": 0.6, "startup_later_persistent_s": 0.002},
                "forward_timing": {"tokens_per_s_largest": 9000.0, "tokens_per_s_smallest": 1500.0},
                "allocator_warmup": {"load_peak_mb_cold": 600.0, "load_peak_mb_warm": 500.0,
                                     "step_peak_mb_cold": 900.0, "step_peak_mb_warm": 1200.0}}


def playbook_records():
    """One repeat of each microbenchmark, as `+sweep=playbook` records it, with known figures."""
    from workloads.playbook import specs as shipped

    out = []
    for i, spec in enumerate((shipped.H2D_COPY, shipped.DATASET_ACCESS, shipped.LOADER_STARTUP,
                              shipped.FORWARD_TIMING, shipped.ALLOCATOR_WARMUP)):
        figures = {**{h[0]: 1.0 for h in spec.headline}, **PAIR_FIGURES[spec.name]}
        out.append({"trial_id": f"c{i}-0", "cell_id": f"c{i}", "repeat": 0, "is_baseline": i == 0, "status": "ok",
                    "swept": {}, "overrides": [f"workload={spec.name}"], "workload_spec": spec.describe(),
                    "resources": {"num_cpus": 1, "num_gpus": 0}, "config": {}, "fingerprint": {},
                    "summary": {"items_per_s": 100.0 + i, "step_p50_s": 0.01, "step_mean_s": 0.01, "steps": 5},
                    "figures": figures})
    return out


def test_a_playbook_run_ends_with_one_pair_line_per_microbenchmark_and_judges_nothing():
    from sweeper import display
    from sweeper.analysis.run import analyze
    from sweeper.report import tables
    from sweeper.results import summary_frame

    records = playbook_records()
    analysis = analyze(summary_frame(records), pd.DataFrame(), AnalysisConfig(), n_resamples=50, records=records)
    text = display.verdicts_text(analysis)
    assert text.splitlines()[-5:] == [
        "  workload=h2d_copy: pinned vs pageable GB/s: 3.00x",
        "  workload=dataset_access: arrow vs numpy time per access: 100x; arrow vs list time per access: 200x",
        "  workload=loader_startup: fresh workers vs persistent workers start-up time of a later epoch: 300x",
        "  workload=forward_timing: largest shape vs smallest shape tokens/s: 6.00x",
        "  workload=allocator_warmup: cold vs warm allocator load peak memory: 1.20x; "
        "cold vs warm allocator first-step peak memory: 0.75x"]
    # nothing is compared with anything else: no verdict rows, noise floors or recommendations
    assert ALONE not in text and "noise floor" not in text and "recommend" not in text
    assert tables.verdicts(analysis)[1] == [] and tables.noise_floor(analysis) == ""
    assert all(s.alone for s in analysis.strata) and len(analysis.strata) == 5


def test_the_playbook_report_ends_with_the_pairs(tmp_path):
    from sweeper.analysis.model import RunData
    from sweeper.analysis.run import analyze
    from sweeper.report import build, markdown, tables
    from sweeper.results import summary_frame

    records = playbook_records()
    summary = summary_frame(records)
    analysis = analyze(summary, pd.DataFrame(), AnalysisConfig(), n_resamples=50, records=records)
    text = markdown.render(build(tmp_path, RunData(tmp_path, summary, pd.DataFrame(), records), analysis))
    assert text.rstrip().splitlines()[-7:] == ["## Each microbenchmark's own comparison (a / b)", "",
                                               *(f"- {line}" for line in tables.pairs(analysis))]
    assert ALONE not in text and "## Recommendation" not in text and "## Verdicts" not in text


@pytest.mark.parametrize("cls, values, key", [
    (specs.CopyParams, {"size_mb": -1}, "workload.params.size_mb"),
    (specs.CopyParams, {"pinned": "yes"}, "workload.params.pinned"),
    (specs.AccessParams, {"backend": "parquet"}, "workload.params.backend"),
    (specs.StartupParams, {"num_workers": 0, "persistent_workers": True}, "workload.params.persistent_workers"),
    (specs.ForwardParams, {"shapes": [[4]]}, "workload.params.shapes"),
    (specs.ForwardParams, {"model": "not a path"}, "workload.params.model"),
    (specs.AllocatorParams, {"batch": 0}, "workload.params.batch"),
    (specs.AllocatorParams, {"colour": 1}, "workload.params.colour"),
])
def test_params_errors_name_the_key(cls, values, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        typed_params(cls, values)


def tiny_mlp(params):
    """A user's model factory: gets the params section, returns a module over token ids."""
    width = params["options"]["width"]
    return torch.nn.Sequential(torch.nn.Embedding(params["vocab_size"], width), torch.nn.Linear(width, 4))


def test_forward_timing_builds_a_users_model_from_its_import_path():
    params = {"model": "tests.test_playbook:tiny_mlp", "batch": 2, "seq_len": 8, "shapes": [[1, 4]],
              "vocab_size": 100, "options": {"width": 16}}
    cfg = TrialConfig(workload=WorkloadConfig(target="workloads.playbook.forward_timing:run", steps=3,
                                              warmup_steps=1, device="cpu", params=params))
    from workloads.playbook.forward_timing import run

    probe = Probe(warmup_steps=1)
    with probe:
        out = run(cfg, probe)
    assert out["model"] == "tests.test_playbook:tiny_mlp" and out["forward_ms_b1_t4"] > 0
    assert probe.summary()["steps"] == 3 and probe.summary()["items_per_s"] > 0
    cfg.workload.params = {**params, "model": "tests.test_playbook:no_such_factory"}
    with pytest.raises(ConfigError, match="workload.params.model=.*defines no 'no_such_factory'"):
        run(cfg, Probe())
    # and before any trial: the plan's check finds the missing name without running the module
    with pytest.raises(ConfigError, match="workload.params.model=.*defines no 'no_such_factory'"):
        typed_params(specs.ForwardParams, {"model": "tests.test_playbook:no_such_factory"})
