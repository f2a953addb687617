"""The torch and DALI loaders: the same samples from the same shards, DALI as an extra that
fails in one line when absent, and +sweep=loaders through `python -m sweeper`.

DALI runs for real here, on the CPU (device_id=None): it is in the test extra."""
import dataclasses
import os
import hashlib
import subprocess
import sys

import pandas as pd
import pytest
import torch

from sweeper.schema import DaliConfig, DataConfig, ImageConfig, root_config_from_dict
from sweeper.errors import ConfigError
from tests.conftest import ROOT

pytest.importorskip("nvidia.dali", reason="DALI is in the test extra: pip install -e '.[test]'")

from workloads.dataloader import open_batches, shard_paths  # noqa: E402

SHARDS, PER_SHARD, BATCH = 2, 24, 8          # 6 batches an epoch


def small_data(tmp_path, **kw) -> DataConfig:
    images = ImageConfig(height=40, width=56, quality=85, crop_size=24, augment=kw.pop("augment", False))
    dali = DaliConfig(num_threads=2, random_shuffle=kw.pop("random_shuffle", False), initial_fill=16)
    return DataConfig(cache_dir=str(tmp_path / "cache"), num_shards=SHARDS, samples_per_shard=PER_SHARD,
                      seq_len=31, vocab_size=1000, batch_size=BATCH, images=images, dali=dali, **kw)


def one_epoch(data: DataConfig, loader: str):
    """Per-sample content hashes of one pass over the shards, in delivery order, and the shapes."""
    data = dataclasses.replace(data, loader=loader)
    batches = open_batches(data, shard_paths(data), torch.device("cpu"), pin=False)()
    out = [batches.next() for _ in range(SHARDS * PER_SHARD // BATCH)]
    assert batches.epochs == 0           # exactly one epoch: DALI's reader ended it (reader_name)
    batches.release()
    hashes = [hashlib.sha1(sample.contiguous().numpy().tobytes()).hexdigest() for b in out for sample in b]
    return hashes, {tuple(b.shape[1:]) for b in out}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tokens", "images"])
def test_both_loaders_deliver_the_same_samples_in_the_same_order(kind, tmp_path):
    """Unshuffled, both read tar after tar in stored order; images are compared decoded
    (augment off): Pillow and DALI's CPU decoder agree to the byte on these JPEGs."""
    data = small_data(tmp_path, kind=kind)
    torch_hashes, torch_shapes = one_epoch(data, "torch")
    dali_hashes, dali_shapes = one_epoch(data, "dali")
    assert len(set(torch_hashes)) == SHARDS * PER_SHARD       # every sample distinct: content, not count
    assert dali_hashes == torch_hashes
    assert dali_shapes == torch_shapes == ({(32,)} if kind == "tokens" else {(40, 56, 3)})


@pytest.mark.slow
def test_dali_shuffles_the_same_samples_within_its_buffer(tmp_path):
    data = small_data(tmp_path, kind="tokens")
    plain, _ = one_epoch(data, "torch")
    shuffled, _ = one_epoch(dataclasses.replace(data, dali=dataclasses.replace(data.dali, random_shuffle=True)), "dali")
    assert sorted(shuffled) == sorted(plain) and shuffled != plain


@pytest.mark.slow
def test_augmented_images_are_crops_of_the_asked_size_from_both_loaders(tmp_path):
    data = small_data(tmp_path, kind="images", augment=True)
    for loader in ("torch", "dali"):
        hashes, shapes = one_epoch(data, loader)
        assert shapes == {(24, 24, 3)} and len(set(hashes)) == len(hashes)


@pytest.mark.slow
def test_index_files_are_written_once_beside_the_shards(tmp_path):
    from workloads.shards import ensure_dali_indexes

    paths = shard_paths(small_data(tmp_path, kind="tokens"))
    indexes = ensure_dali_indexes(paths, str(tmp_path / "cache"))
    assert indexes == [p[:-len(".tar")] + ".idx" for p in paths]
    first = [open(i).read() for i in indexes]
    assert first[0].startswith("v1.2 24\n")                   # DALI's format: version, sample count
    stamps = [os.stat(i).st_mtime_ns for i in indexes]
    ensure_dali_indexes(paths, str(tmp_path / "cache"))
    assert [os.stat(i).st_mtime_ns for i in indexes] == stamps   # reused, not rewritten


@pytest.mark.parametrize("override, key", [
    ({"executor": "fast"}, "data.dali.executor: must be one of ('dynamic', 'pipelined', 'serial'), got 'fast'"),
    ({"num_thread": 2}, "data.dali.num_thread: unknown key"),
    ({"hw_decoder_load": 1.5}, "data.dali.hw_decoder_load: must be between 0 and 1"),
])
def test_a_bad_dali_key_is_named(override, key):
    with pytest.raises(ConfigError) as err:
        root_config_from_dict({"data": {"loader": "dali", "dali": override}})
    assert str(err.value).startswith(key)


def test_the_training_step_refuses_what_it_cannot_read():
    from sweeper.spec import spec_for

    root = root_config_from_dict({"workload": {"target": "workloads.train_step:run", "spec": "workloads.specs:TRAIN_STEP"},
                                  "train": {"data_source": "shards", "seq_len": 64},
                                  "data": {"loader": "dali", "seq_len": 64, "vocab_size": 512}})
    with pytest.raises(ConfigError, match="^data.loader=dali data.kind=tokens: the training step reads token shards"):
        spec_for(root.workload).validate(root)


@pytest.mark.slow
def test_a_misspelt_dali_key_is_named_by_hydra(sweeper_cli):
    result = sweeper_cli(["data.loader=dali", "data.dali.num_thread=2", "dry_run=true"])
    assert result.returncode != 0
    assert "num_thread" in result.stderr and "DaliConfig" in result.stderr


# Runs the CLI as if DALI were not installed: a meta-path finder at the front refuses every
# nvidia.dali module, as a missing package does (ModuleNotFoundError).
_WITHOUT_DALI = """
import importlib.abc, runpy, sys
class NoDali(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "nvidia.dali" or name.startswith("nvidia.dali."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoDali())
sys.argv = ["sweeper", *sys.argv[1:]]
runpy.run_module("sweeper", run_name="__main__")
"""


@pytest.mark.slow
def test_dali_without_dali_is_one_line_exit_2_before_any_trial(tmp_path):
    cmd = [sys.executable, "-c", _WITHOUT_DALI, f"results_dir={tmp_path / 'results'}", "data.loader=dali",
           "executor=local", "wandb.enabled=false", "workload.steps=1"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert lines == ["error: data.loader=dali: NVIDIA DALI is not installed; pip install 'sweeper[dali]' "
                     "(from a checkout: pip install -e '.[dali]'), or data.loader=torch"]
    assert not list((tmp_path / "results").glob("*/*/trials/*"))


@pytest.mark.slow
def test_loaders_sweep_runs_both_loaders_with_verdicts(sweeper_cli, tmp_path):
    """The shipped sweep, tiny, in this process (executor=local: Ray would add 30 s here and
    nothing this test checks): both loaders on tokens and on images, each kind a stratum with its
    own baseline (analysis.compare_within=[data.kind]); DALI's memory figures; verdicts per kind."""
    result = sweeper_cli(["+sweep=loaders", "executor=local", "repeats=2", "workload.steps=4",
                          "workload.warmup_steps=1", "data.num_shards=2", "data.samples_per_shard=16",
                          "data.batch_size=4", "data.images.height=32", "data.images.width=40",
                          "data.images.crop_size=16", "data.num_workers=1", "data.dali.num_threads=1"])
    assert result.returncode == 0, result.stderr[-3000:]
    run = next((tmp_path / "results" / "loaders").iterdir())
    summary = pd.read_parquet(run / "summary.parquet")
    assert (summary["status"] == "ok").all() and (summary["items_per_s"] > 0).all()
    # each kind's baseline (the DataLoader) runs twice as often: its own noise floor
    counts = summary.groupby(["data.kind", "data.loader"]).size().to_dict()
    assert counts == {("images", "dali"): 2, ("images", "torch"): 4, ("tokens", "dali"): 2, ("tokens", "torch"): 4}
    assert (summary["loader"] == summary["data.loader"]).all()
    dali = summary[summary["loader"] == "dali"]
    assert (dali["dali_mem_peak_mb"] >= dali["dali_mem_after_release_mb"]).all()
    assert (dali["dali_mem_after_release_mb"] > 0).all()
    cells = pd.read_parquet(run / "cells.parquet")
    assert sorted(cells.loc[cells["is_baseline"], "cell"]) == ["kind=images loader=torch", "kind=tokens loader=torch"]
    assert (cells["stratum"] == "kind=" + cells["data.kind"]).all()
    out = result.stdout
    verdicts = out.split("verdicts against each stratum's baseline (compared within kind):")[1].splitlines()
    for kind in ("tokens", "images"):
        assert any(line.startswith(f"kind={kind}  kind={kind} loader=torch") and "baseline" in line for line in verdicts)
        assert any(line.startswith(f"kind={kind}  kind={kind} loader=dali") for line in verdicts)
        assert f"noise floor, kind={kind} (baseline A/A" in out and f"  kind={kind}: " in out
    report = (run / "report.md").read_text()
    assert "## Verdicts against each stratum's baseline (compared within kind)" in report
    assert "| stratum | cell |" in report


@pytest.mark.slow
def test_what_the_zygote_preloads_never_imports_dali():
    """The zygote imports the spec's preload once and forks every trial from it: DALI there
    could start CUDA in a process that forks. DALI is imported inside the trial only."""
    code = ("import importlib, sys\n"
            "from workloads.specs import DATALOADER\n"
            "for name in DATALOADER.preload:\n    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.startswith('nvidia.dali')))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
