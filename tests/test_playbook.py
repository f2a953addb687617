"""The playbook's microbenchmarks: each runs as a trial through one real sweep
(`+sweep=playbook`, CPU sizes) and returns finite figures that relate as they must."""
import math

import pytest
import torch

from sweeper.analysis.run import analyze_run, run_analysis_config
from sweeper.errors import ConfigError
from sweeper.probe import Probe
from sweeper.results import read_records
from sweeper.schema import TrialConfig, WorkloadConfig
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
def test_every_microbenchmark_is_a_trial_with_finite_figures(playbook):
    _, _, records = playbook
    assert sorted(records) == sorted(WORKLOADS)
    for name, record in records.items():
        assert record["status"] == "ok", (name, record.get("error_message"))
        assert record["summary"]["steps"] > 0 and record["summary"]["items_per_s"] > 0, name
        numbers = {k: v for k, v in record["figures"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert numbers and all(math.isfinite(v) for v in numbers.values()), (name, numbers)
        for key, *_ in record["workload_spec"]["headline"]:
            assert record["figures"][key] >= 0, (name, key)


@pytest.mark.slow
def test_copy_on_a_cpu_is_a_host_memcpy_and_says_so(playbook):
    _, _, records = playbook
    copy = figures(records, "h2d_copy")
    assert copy["copy_kind"] == "host_to_host" and copy["pinned_effective"] is False
    assert any("host memcpy" in w for w in records["h2d_copy"]["warnings"])
    assert copy["size_mb"] == 8.0                                   # auto: the CPU size
    phase_p50_s = records["h2d_copy"]["summary"]["phase_h2d_p50_s"]   # the copies as the probe timed them
    assert copy["copy_gbps"] == pytest.approx(copy["size_mb"] / 1e3 / phase_p50_s)
    assert copy["pinned_gbps"] == copy["copy_gbps"] and copy["pageable_gbps"] > 0   # the steps were "pinned"
    assert copy["pinned_speedup"] == pytest.approx(copy["pinned_gbps"] / copy["pageable_gbps"])
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
def test_a_run_over_several_workloads_is_labelled_by_workload_and_judges_none_against_another(playbook):
    from sweeper.analysis.cells import ALONE
    from sweeper.analysis.recommend import recommendation_lines

    stdout, run, _ = playbook
    _, analysis = analyze_run(run, run_analysis_config(run))
    assert sorted(analysis.cells["cell"]) == sorted(f"workload={w}" for w in WORKLOADS)
    # each workload is a stratum of its own: alone there, so no baseline, no verdict, no recommendation
    assert analysis.strata == ["workload"] and analysis.baselines == {}
    assert sorted(analysis.cells["stratum"]) == sorted(f"workload={w}" for w in WORKLOADS)
    assert (analysis.verdicts["verdict"] == ALONE).all()
    assert all(r is None for r in analysis.recommendations.values())
    assert recommendation_lines(analysis) == [f"{label}: {ALONE}: no other cell to compare it with"
                                              for label in analysis.stratum_labels()]
    assert any("holds 5 workloads" in note for note in analysis.notes)
    assert not any("one repeat per cell" in note for note in analysis.notes)   # nothing to judge, so no advice
    assert "workload=h2d_copy" in stdout and "GB/s" in stdout
    assert f"workload=h2d_copy: {ALONE}" in stdout and "no cell finished, or there is no baseline" not in stdout


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
