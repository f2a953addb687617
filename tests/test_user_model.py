"""A user's own model in the training-step engine (train.model, train.batch, train.flops_per_token,
train.deepspeed_config): plan-time checks, the DeepSpeed JSON's resolution, and real training.

The model is the one users are pointed at, examples/user_model/nanogpt_style.py: written apart
from workloads/model.py, in nanoGPT's layout (`transformer.h`, `(logits, loss)` out), it builds the
same architecture and draws its initial weights in the same order, so that with the same seed its
losses must equal the engine's preset's (what its docstring promises). The test names it as the docs
do (`nanogpt_style:gpt`, `nanogpt_style:hf_style`); a small module of its own (USERGPT, below) adds a
batch function and a factory that is no Module.

Tolerances, after 4 optimizer steps of the tiny shape (lr 3e-3, a pool of 2 micro-batches of 4):
  - DeepSpeed building a JSON's AdamW ("auto" params) against the preset's native AdamW, fp32:
    relative difference < 1e-5 (seen: equal)
  - user model against the preset, same precision x accumulation x ZeRO stage, 2 gloo ranks:
    relative difference < 1e-6 per step (seen: equal). A missing autocast would show: bf16 and
    fp32 differ by ~1e-5 relative at the first step and ~6e-5 at the fourth

The precision x accumulation x ZeRO grid is a fractional design (each level of each factor at
least once, 4 points instead of 24): fp32/2/0, fp16/1/1, bf16/2/2, fp32/1/3 with activation
checkpointing (the Hugging Face-style model at stages 0 and 3 too).
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.errors import ConfigError
from sweeper.results import read_records
from sweeper.schema import TrainConfig, TrialConfig, WorkloadConfig, DataConfig, trial_config_from_dict
from tests.conftest import ROOT

USER_REL_TOL = 1e-6
SEED_JSON = ROOT / "examples" / "deepspeed" / "seed_article.json"
EXAMPLE = ROOT / "examples" / "user_model"         # nanogpt_style.py, the model users are pointed at
FAST = ["workload.steps=3", "workload.warmup_steps=1", "train.lr=3e-3", "train.synthetic_batches=2",
        "train.micro_batch=4"]

USERGPT = '''\
"""The test's own functions beside the example model: a batch function, a factory that is no Module."""
import torch


def not_a_module(train):
    return "a string"


def batches(train, rank, world_size, seed):
    """Two micro-batches of random tokens a pass, on the CPU; the engine moves them."""
    g = torch.Generator().manual_seed(seed * 7 + rank)
    s = train.shape()
    for _ in range(2):
        tokens = torch.randint(0, s["vocab_size"], (train.micro_batch, s["seq_len"] + 1), generator=g)
        yield tokens[:, :-1], tokens[:, 1:]
'''


@pytest.fixture
def usergpt(tmp_path, monkeypatch):
    """The test's module, importable as `usergpt` (with the example beside it) here and in any
    process started with PYTHONPATH=_env(folder)."""
    folder = tmp_path / "mods"
    folder.mkdir()
    (folder / "usergpt.py").write_text(USERGPT)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(folder))
    return folder


# -- plan time: import paths, without importing them -------------------------------------
def _step_cfg(**train):
    cfg = TrialConfig(workload=WorkloadConfig(target="workloads.train_step:run", steps=3, warmup_steps=1, device="cpu"),
                      data=DataConfig(), train=TrainConfig(**{"lr": 3e-3, "synthetic_batches": 2, "micro_batch": 4,
                                                              **train}))
    cfg.check()
    return cfg


@pytest.mark.parametrize("train, message", [
    ({"model": "usergpt:no_such_factory"}, "train.model='usergpt:no_such_factory': 'usergpt' ("),
    ({"model": "no_such_module_here:gpt"}, "train.model='no_such_module_here:gpt': cannot find module"),
    ({"batch": "usergpt:nope"}, "train.batch='usergpt:nope': 'usergpt' ("),
])
def test_a_missing_model_or_batch_function_is_one_line_at_plan_time(usergpt, train, message):
    from workloads.specs import TRAIN_STEP

    with pytest.raises(ConfigError) as err:
        TRAIN_STEP.validate(_step_cfg(**train), "cpu")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_import_check_runs_no_user_code(usergpt):
    """The check reads the source: a module that would fail on import still passes the check,
    and a name it defines is found, so the driver never runs the user's module."""
    from workloads.user_model import check_import_path

    (usergpt / "explodes.py").write_text("raise SystemExit('imported!')\ndef factory(train):\n    pass\n")
    assert check_import_path("explodes:factory", "train.model") is None
    assert "defines no 'other'" in check_import_path("explodes:other", "train.model")
    assert "explodes" not in sys.modules


@pytest.mark.parametrize("train, message", [
    ({"model": "usergpt"}, "train.model: must look like 'package.module:name', got 'usergpt'"),
    ({"flops_per_token": -1.0}, "train.flops_per_token: must be positive or null"),
    ({"deepspeed_config": "x.json"}, "train.deepspeed_config: is a DeepSpeed config but train.backend=native"),
    ({"batch": "m:f", "data_source": "shards"}, "train.batch: makes the batches, so train.data_source=shards"),
])
def test_bad_user_model_keys_name_their_key(train, message):
    with pytest.raises(ConfigError) as err:
        trial_config_from_dict({"train": train, "data": {"seq_len": 64, "vocab_size": 512}})
    assert str(err.value).startswith(message)


# -- the DeepSpeed JSON: base, overrides, "auto", contradictions ----------------------------
def _resolve(user, world_size=2, **train):
    from workloads.deepspeed_config import resolve

    t = TrainConfig(**{"backend": "deepspeed", "micro_batch": 4, "accum_steps": 2, **train})
    return resolve(t, world_size, user, hidden=64, warmup_steps=1, total_steps=4)


def test_seed_article_json_resolves_with_the_trials_axes():
    seed = json.loads(SEED_JSON.read_text())
    assert (seed["train_batch_size"], seed["fp16"]["enabled"], seed["zero_optimization"]["stage"]) == (512, True, 2)
    assert seed["activation_checkpointing"]["partition_activations"] is True
    seed["train_batch_size"] = 16
    out = _resolve(seed, precision="bf16", zero_stage=3, activation_checkpointing=True)
    c = out.config
    assert out.problems == []
    assert (c["train_batch_size"], c["train_micro_batch_size_per_gpu"], c["gradient_accumulation_steps"]) == (16, 4, 2)
    assert c["zero_optimization"]["stage"] == 3 and c["zero_optimization"]["reduce_bucket_size"] == 64 * 64
    assert c["fp16"] == {"enabled": False, "loss_scale": 0, "initial_scale_power": 16} and c["bf16"] == {"enabled": True}
    assert c["gradient_clipping"] == 0.0 and c["activation_checkpointing"]["partition_activations"] is True
    assert out.overridden == ["zero_optimization.stage: 2 -> 3 (train.zero_stage)",
                              "fp16.enabled: true -> false (train.precision)"]
    assert json.loads(SEED_JSON.read_text()) == {**seed, "train_batch_size": 512}     # the file is left alone


def test_auto_values_are_filled_as_hugging_face_does():
    user = {"train_batch_size": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto",
            "eps": "auto", "weight_decay": "auto"}}, "scheduler": {"type": "WarmupLR", "params": {
            "warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
            "zero_optimization": {"stage": "auto", "stage3_prefetch_bucket_size": "auto",
                                  "stage3_param_persistence_threshold": "auto"}}
    out = _resolve(user, world_size=4, lr=1e-3, weight_decay=0.05)
    c = out.config
    assert out.problems == [] and out.overridden == []
    assert c["train_batch_size"] == 4 * 2 * 4
    assert c["optimizer"]["params"] == {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.05}
    assert c["scheduler"]["params"] == {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 1}
    assert c["zero_optimization"]["stage3_prefetch_bucket_size"] == int(0.9 * 64 * 64)
    assert c["zero_optimization"]["stage3_param_persistence_threshold"] == 640
    assert "zero_allow_untested_optimizer" not in c       # DeepSpeed builds the JSON's optimizer


@pytest.mark.parametrize("user, train, problem", [
    ({"train_batch_size": 512}, {}, "train_batch_size=512 but train.micro_batch x train.accum_steps x "
                                    "train.world_size = 4 x 2 x 2 = 16; choose them"),
    ({"amp": {"opt_level": "auto"}}, {}, 'amp.opt_level is "auto" but nothing in the trial fills it'),
    ({"activation_checkpointing": {"partition_activations": True}}, {},
     "activation_checkpointing.partition_activations=true but train.activation_checkpointing=false"),
    ({"zero_optimization": {"reduce_scatter": True}}, {"reduce_scatter": False},
     "zero_optimization.reduce_scatter=true but train.reduce_scatter=False"),
])
def test_contradictions_are_one_line_each(user, train, problem):
    out = _resolve(user, **train)
    assert len(out.problems) == 1 and out.problems[0].startswith(problem), out.problems


def test_a_json_field_stands_where_the_engine_knob_is_at_its_default():
    out = _resolve({"zero_optimization": {"reduce_scatter": False, "overlap_comm": False}})
    assert out.problems == [] and out.config["zero_optimization"]["reduce_scatter"] is False
    assert out.config["zero_optimization"]["overlap_comm"] is False


def test_fp16_refusal_follows_deepspeeds_cpu_accelerator():
    from workloads.deepspeed_config import fp16_refused_on_cpu

    assert fp16_refused_on_cpu({"avx2", "avx512f", "avx512_bf16"})
    assert not fp16_refused_on_cpu({"avx512f", "avx512_fp16"}) and not fp16_refused_on_cpu({"amx_fp16"})


# -- training, in this process: MFU's source, batches, a factory that is no Module ----------
def _train(cfg):
    from sweeper.probe import Probe
    from workloads.train_step import run

    probe = Probe(warmup_steps=cfg.workload.warmup_steps)
    return run(cfg, probe), probe


def _tiny_gpt_params(s):
    """The example model's parameter count by hand: tied embedding, positions, blocks, final norm."""
    d = s["n_embd"]
    return s["vocab_size"] * d + s["seq_len"] * d + s["n_layer"] * (12 * d * d + 13 * d) + 2 * d


def test_mfu_from_an_estimated_or_a_given_flops_per_token(usergpt):
    figures, _ = _train(_step_cfg(model="nanogpt_style:gpt", peak_flops=1e12))
    s = TrainConfig().shape()
    n = _tiny_gpt_params(s)
    assert figures["n_params"] == n == 136_960
    assert figures["flops_per_token"] == 6 * n + 12 * s["n_layer"] * s["n_embd"] * s["seq_len"]
    assert figures["flops_source"] == "estimated 6N+attn" and figures["model"] == "nanogpt_style:gpt"
    assert figures["mfu"] == pytest.approx(figures["tokens_per_s"] * figures["flops_per_token"] / 1e12)
    given, _ = _train(_step_cfg(model="nanogpt_style:gpt", peak_flops=1e12, flops_per_token=2.5e6))
    assert given["flops_source"] == "given" and given["flops_per_token"] == 2.5e6
    assert given["mfu"] == pytest.approx(given["tokens_per_s"] * 2.5e6 / 1e12)


def test_a_batch_function_feeds_the_user_model(usergpt):
    figures, probe = _train(_step_cfg(model="nanogpt_style:hf_style", batch="usergpt:batches"))
    assert all(r["phase_h2d_s"] > 0 and math.isfinite(r["loss"]) for r in probe.rows)
    assert figures["loss_initial"] - figures["loss_final"] > 0.05        # two batches a pass: it learns them


def test_a_factory_that_returns_no_module_fails_the_trial_with_one_line(usergpt):
    with pytest.raises(RuntimeError, match=r"^train.model='usergpt:not_a_module': the factory returned str, "
                                           r"not a torch.nn.Module$"):
        _train(_step_cfg(model="usergpt:not_a_module"))


# -- two gloo ranks: the user's model against the preset, through every ZeRO stage ---------
GRID = [  # (precision, accum_steps, zero_stage, activation_checkpointing): each level of each factor once or more
    ("fp32", 2, 0, False), ("fp16", 1, 1, False), ("bf16", 2, 2, False), ("fp32", 1, 3, True)]


def grid_checks(mods):
    """Run in a fresh process: each grid point in a child forked from it (torch imported once; FSDP2
    and gloo state from one point's runs does not leak into the next), with the preset, the user's
    model and, under DDP (stage 0) and FSDP2 (stage 3), the Hugging Face-style model; one JSON line a run."""
    import multiprocessing

    import workloads.train_step  # noqa: F401  torch and dynamo imported once, before the forks

    sys.path[:0] = [mods, str(EXAMPLE)]
    for point in GRID:
        for model in [None, "nanogpt_style:gpt"] + (["nanogpt_style:hf_style"] if point[2] in (0, 3) else []):
            # one child a run: successive FSDP2 runs in one process can hang
            child = multiprocessing.get_context("fork").Process(target=_grid_point, args=(*point, model))
            child.start()
            child.join(120)
            if child.is_alive():
                child.kill()
                print(f"POINT TIMED OUT {point} {model}", flush=True)
    if __import__("importlib").util.find_spec("deepspeed") is not None:
        child = multiprocessing.get_context("fork").Process(target=_deepspeed_builds_the_jsons_optimizer, args=(mods,))
        child.start()
        child.join(120)
        if child.is_alive():
            child.kill()


DS_OPTIMIZER_JSON = {"train_batch_size": "auto", "zero_optimization": {"stage": "auto"},
                     "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                               "weight_decay": "auto", "torch_adam": True}}}


def _deepspeed_builds_the_jsons_optimizer(mods):
    """DeepSpeed builds the JSON's optimizer from its "auto" params (torch's AdamW: no op to build)."""
    import torch

    from sweeper.probe import Probe
    from workloads.train_step import run

    torch.set_num_threads(2)
    path = Path(mods) / "ds_optimizer.json"
    path.write_text(json.dumps(DS_OPTIMIZER_JSON))
    cfg = _step_cfg(world_size=2, backend="deepspeed", zero_stage=1, model="nanogpt_style:gpt",
                    deepspeed_config=str(path))
    probe = Probe(warmup_steps=1)
    figures = run(cfg, probe)
    print("DEEPSPEED " + json.dumps({"losses": [r["loss"] for r in probe.rows],
                                     "fused_adamw_effective": figures["fused_adamw_effective"]}), flush=True)


def _grid_point(precision, accum, stage, checkpointing, model):
    import torch

    from sweeper.probe import Probe
    from workloads.train_step import run

    torch.set_num_threads(2)
    cfg = _step_cfg(world_size=2, precision=precision, accum_steps=accum, zero_stage=stage,
                    activation_checkpointing=checkpointing, model=model)
    probe = Probe(warmup_steps=1)
    figures = run(cfg, probe)
    print("RUN " + json.dumps({"point": [precision, accum, stage, checkpointing], "model": model,
                               "losses": [r["loss"] for r in probe.rows], "world_size": figures["world_size"],
                               "effective_batch": figures["effective_batch"],
                               "rank1_loss": figures["rank1_loss_final_local"],
                               **{k: figures[k] for k in ("parallel", "fsdp_units", "n_blocks",
                                                          "checkpointed_blocks")}}), flush=True)


@pytest.mark.slow
def test_user_model_matches_the_preset_through_precision_accumulation_and_zero(usergpt):
    code = f"from tests.test_user_model import grid_checks; grid_checks({str(usergpt)!r})"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    runs = [json.loads(line[4:]) for line in result.stdout.splitlines() if line.startswith("RUN ")]
    assert len(runs) == 10, result.stdout[-3000:] + result.stderr[-3000:]
    by_point = {}
    for r in runs:
        by_point.setdefault(tuple(r["point"]), {})[r["model"]] = r
    for point, models in by_point.items():
        preset = models[None]
        assert preset["world_size"] == 2 and preset["effective_batch"] == 4 * point[1] * 2
        assert preset["losses"][0] - preset["losses"][-1] > 0.2, point         # it trains: the match means something
        for name, other in models.items():
            assert other["losses"] == pytest.approx(preset["losses"], rel=USER_REL_TOL), (point, name)
            assert other["rank1_loss"] == pytest.approx(preset["rank1_loss"], rel=USER_REL_TOL), (point, name)
            # the same wrapping: DDP, DDP + ZeroRedundancyOptimizer, or FSDP2 with a unit per block and the root
            assert (other["parallel"], other["fsdp_units"], other["n_blocks"]) == \
                   (preset["parallel"], preset["fsdp_units"], 2), (point, name)
            assert other["checkpointed_blocks"] == (2 if point[3] else 0), (point, name)
    assert [by_point[p][None]["parallel"] for p in sorted(by_point, key=lambda p: p[2])] == \
           ["ddp", "ddp+zero1", "fsdp2", "fsdp2"]
    assert by_point[("bf16", 2, 2, False)][None]["fsdp_units"] == 3
    deepspeed = [json.loads(line[10:]) for line in result.stdout.splitlines() if line.startswith("DEEPSPEED ")]
    if __import__("importlib").util.find_spec("deepspeed") is not None:
        # the JSON's optimizer, its lr, betas, eps and decay filled from the trial, trains as the engine's AdamW:
        # fp32, one micro-batch a step, ZeRO 1 against the preset at stage 3 (stages agree in fp32; checkpointing
        # changes no loss)
        assert len(deepspeed) == 1, result.stdout[-3000:] + result.stderr[-3000:]
        assert deepspeed[0]["losses"] == pytest.approx(by_point[("fp32", 1, 3, True)][None]["losses"], rel=1e-5)


# -- through `python -m sweeper`: DeepSpeed with the seed article's JSON, and what it refuses -----
def _seed_json(tmp_path, **changes):
    config = {**json.loads(SEED_JSON.read_text()), **changes}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    return path


def _env(usergpt):
    return {"PYTHONPATH": os.pathsep.join([str(usergpt), str(EXAMPLE)])}


needs_deepspeed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("deepspeed") is None, reason="DeepSpeed is not installed")


@pytest.mark.slow
@needs_deepspeed
def test_seed_article_json_runs_the_hf_style_model_on_deepspeeds_cpu_accelerator(sweeper_cli, tmp_path, usergpt):
    """ZeRO 2 with reduce_scatter, contiguous_gradients and partitioned activation checkpoints, the JSON's
    train_batch_size made to fit 4 x 2 x 2 ranks, in bf16 (the JSON's fp16 is what a CPU refuses). One
    trial, executor=local (Ray adds nothing here; tests/test_train_step.py runs DeepSpeed trials through
    Ray): 16 s here against 54 s through a local Ray on the shared 2-core machine."""
    path = _seed_json(tmp_path, train_batch_size=16)
    result = sweeper_cli(["+sweep=zero", "train.backend=deepspeed", f"train.deepspeed_config={path}",
                          "train.model=nanogpt_style:hf_style", "train.precision=bf16", "train.zero_stage=2",
                          "train.accum_steps=2", "train.activation_checkpointing=true", "train.peak_flops=1e12",
                          "train.flops_per_token=1e6", "report.enabled=false", "executor=local", *FAST],
                         timeout=300, env_extra=_env(usergpt))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = [p for p in (tmp_path / "results" / "zero").iterdir() if (p / "trials").is_dir()]
    records = read_records(runs[0])
    assert len(records) == 1 and all(r["status"] == "ok" for r in records), records
    for r in records:
        f = r["figures"]
        assert f["model"] == "nanogpt_style:hf_style" and f["backend"] == "deepspeed" and f["world_size"] == 2
        assert f["checkpointed_blocks"] == 2 and f["loss_initial"] - f["loss_final"] > 0.2, f
        assert f["flops_source"] == "given" and f["mfu"] == pytest.approx(f["tokens_per_s"] * 1e6 / (1e12 * 2))
        assert f["deepspeed_overridden"] == "fp16.enabled: true -> false (train.precision)"
        stored = json.loads((runs[0] / "trials" / r["trial_id"] / "deepspeed_config.json").read_text())
        assert (stored["train_batch_size"], stored["train_micro_batch_size_per_gpu"],
                stored["gradient_accumulation_steps"]) == (16, 4, 2)
        assert stored["zero_optimization"]["stage"] == 2 and stored["zero_optimization"]["reduce_scatter"] is True
        assert stored["zero_optimization"]["contiguous_gradients"] is True
        assert stored["zero_optimization"]["reduce_bucket_size"] == 64 * 64            # "auto": hidden size squared
        assert stored["activation_checkpointing"]["partition_activations"] is True
        assert stored["bf16"]["enabled"] is True and stored["fp16"]["enabled"] is False
        assert stored["gradient_clipping"] == 0.0                                        # "auto": no clipping


@pytest.mark.slow
def test_contradictions_in_the_json_are_one_line_each_before_any_trial(sweeper_cli, tmp_path, usergpt):
    path = _seed_json(tmp_path)                       # train_batch_size 512; partitioned activations
    result = sweeper_cli(["+sweep=zero", "train.backend=deepspeed", f"train.deepspeed_config={path}",
                          "train.model=nanogpt_style:gpt", "train.zero_stage=2", "train.precision=bf16",
                          "executor=local", *FAST],      # a local Ray would start while the plan is checked
                         timeout=120, env_extra=_env(usergpt))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert lines[-2].startswith(f"error: train.deepspeed_config='{path}': train_batch_size=512 but train.micro_batch "
                                f"x train.accum_steps x train.world_size = 4 x 1 x 2 = 8"), lines
    assert lines[-1].startswith(f"train.deepspeed_config='{path}': activation_checkpointing.partition_activations="
                                f"true but train.activation_checkpointing=false"), lines
    assert not (tmp_path / "results" / "zero").exists() or not list((tmp_path / "results" / "zero").glob("*/trials/*"))


@pytest.mark.slow
def test_fp16_on_deepspeeds_cpu_accelerator_is_one_line_before_any_trial(sweeper_cli, tmp_path, usergpt):
    from workloads.deepspeed_config import cpu_flags, fp16_refused_on_cpu

    if not fp16_refused_on_cpu(cpu_flags()):
        pytest.skip("this CPU has oneDNN fp16 (AVX512-FP16 or AMX-FP16): DeepSpeed's CPU accelerator allows fp16")
    path, timeline = _seed_json(tmp_path, train_batch_size=16), tmp_path / "timeline"
    result = sweeper_cli(["+sweep=zero", "train.backend=deepspeed", f"train.deepspeed_config={path}",
                          "train.model=nanogpt_style:gpt", "train.zero_stage=2", "train.precision=fp16",
                          "train.accum_steps=2", "train.activation_checkpointing=true", *FAST],
                         timeout=120, env_extra={**_env(usergpt), "SWEEPER_TIMELINE": str(timeline)})
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: train.precision=fp16: DeepSpeed's CPU accelerator refuses fp16 here (is_fp16_supported() is false: "
        f"this CPU has no AVX512-FP16 or AMX-FP16) and these trials run on CPUs (train.deepspeed_config='{path}' "
        f"asks for it too); use train.precision=bf16 or fp32, or GPUs")
    phases = [line.split()[-1] for line in timeline.read_text().splitlines()]
    assert "first_job_composed" in phases and "ray_ready" not in phases, phases    # said before Ray started


def test_the_loss_is_the_tensor_its_loss_or_a_tuples_last_element():
    import torch

    from workloads.user_model import loss_of

    loss, logits = torch.tensor(2.5), torch.zeros(2, 3)
    for output in (loss, {"loss": loss, "logits": logits}, (logits, loss), [logits, loss.reshape(1)]):
        assert loss_of(output).item() == 2.5 and loss_of(output).dim() == 0
    for output in (logits, (loss, logits), {"logits": logits}):
        with pytest.raises(RuntimeError, match=r"^train.model: model\(inputs, targets\) returned \w+, from which no "
                                               r"scalar loss was found"):
            loss_of(output)


def test_checkpointing_a_model_without_blocks_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "flat.py").write_text("import torch\ndef mlp(train):\n"
                                      "    return torch.nn.Sequential(torch.nn.Linear(4, 4))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from workloads.model import torch_checkpoint
    from workloads.parallel import make_model

    train = TrainConfig(model="flat:mlp", activation_checkpointing=True)
    with pytest.raises(RuntimeError, match=r"^train.activation_checkpointing=true but train.model='flat:mlp' has no "
                                           r"nn.ModuleList of blocks to checkpoint$"):
        make_model(train, None, torch_checkpoint)
