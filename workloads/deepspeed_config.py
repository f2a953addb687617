"""The DeepSpeed config of a trial: the engine's own, or a user's JSON with the trial's axes over it.

    train.deepspeed_config=ds.json    the JSON is the base; then, in this order:
      1. the sweep's axes are written over its fields (a number that differs is
         overridden and listed in `deepspeed_overridden`): train_micro_batch_size_per_gpu,
         gradient_accumulation_steps, zero_optimization.stage, fp16.enabled, bf16.enabled
      2. train_batch_size is derived: "auto" or absent becomes micro x accum x world;
         a number that differs is a contradiction
      3. other "auto" values are filled as Hugging Face's integration fills them
         (transformers' HfTrainerDeepSpeedConfig), from the trial's settings
      4. what the engine needs, where the JSON says nothing (no clipping, quiet logs,
         torch's AdamW as an "untested" optimizer when the JSON names none)

Contradictions (one line each, at plan time): train_batch_size against the product,
an "auto" nothing fills, a zero_optimization field against an engine knob set away
from its default, activation partitioning without train.activation_checkpointing, and
(spec check, knowing the device) fp16 where DeepSpeed's CPU accelerator refuses it.

Pure: no torch, no DeepSpeed; planning and the trial call the same `resolve`.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

AUTO = "auto"
# Engine knobs that are also zero_optimization fields: their schema defaults.
ENGINE_ZERO_KNOBS = (("reduce_scatter", True), ("contiguous_gradients", True))


def engine_config(train, world_size: int) -> Dict[str, Any]:
    """The DeepSpeed config a trial's settings amount to, without a JSON of the user's."""
    config: Dict[str, Any] = {
        "train_batch_size": train.micro_batch * train.accum_steps * world_size,
        "train_micro_batch_size_per_gpu": train.micro_batch,
        "gradient_accumulation_steps": train.accum_steps,
        "zero_optimization": {"stage": train.zero_stage, "reduce_scatter": train.reduce_scatter,
                              "contiguous_gradients": train.contiguous_gradients, "overlap_comm": True},
        "bf16": {"enabled": train.precision == "bf16"},
        "fp16": {"enabled": train.precision == "fp16"},
        "zero_allow_untested_optimizer": True,     # torch's AdamW: no DeepSpeed op to build
        "gradient_clipping": 0.0,                  # as the native backend, which does not clip
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if train.activation_checkpointing:
        config["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False,
                                              "contiguous_memory_optimization": False}
    return config


def load_json(path: str) -> Dict[str, Any]:
    """The user's JSON; ValueError with what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except OSError as exc:
        raise ValueError(f"cannot read it ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"must hold a JSON object, got {type(value).__name__}")
    return value


@dataclass
class Resolved:
    config: Dict[str, Any]
    overridden: List[str] = field(default_factory=list)   # "key: json value -> trial value"
    problems: List[str] = field(default_factory=list)     # contradictions, one line each


def _axes(train) -> Tuple[Tuple[str, Any, str], ...]:
    """(JSON key, the trial's value, the engine's key) of each axis the sweep sets."""
    return (("train_micro_batch_size_per_gpu", train.micro_batch, "train.micro_batch"),
            ("gradient_accumulation_steps", train.accum_steps, "train.accum_steps"),
            ("zero_optimization.stage", train.zero_stage, "train.zero_stage"),
            ("fp16.enabled", train.precision == "fp16", "train.precision"),
            ("bf16.enabled", train.precision == "bf16", "train.precision"))


def _hf_fills(train, hidden: int, warmup_steps: int, total_steps: int) -> Dict[str, Any]:
    """What Hugging Face's integration puts in place of "auto" for the keys it knows, from
    this trial's settings (max_grad_norm: the engine does not clip)."""
    return {"gradient_clipping": 0.0,
            "optimizer.params.lr": train.lr, "optimizer.params.betas": [0.9, 0.95],
            "optimizer.params.eps": 1e-8, "optimizer.params.weight_decay": train.weight_decay,
            "scheduler.params.warmup_min_lr": 0, "scheduler.params.warmup_max_lr": train.lr,
            "scheduler.params.warmup_num_steps": warmup_steps, "scheduler.params.total_num_steps": total_steps,
            "zero_optimization.reduce_bucket_size": hidden * hidden,
            "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
            "zero_optimization.stage3_param_persistence_threshold": 10 * hidden}


def resolve(train, world_size: int, user: Dict[str, Any], hidden: int, warmup_steps: int,
            total_steps: int) -> Resolved:
    """The user's JSON with the trial's axes, the derived batch and the "auto" values in place."""
    config = copy.deepcopy(user)
    if "bfloat16" in config:                       # DeepSpeed's older name for the bf16 section
        config.setdefault("bf16", config.pop("bfloat16"))
    out = Resolved(config)
    for key, value, engine_key in _axes(train):
        found = _get(config, key)
        if found not in (None, AUTO) and found != value:
            out.overridden.append(f"{key}: {json.dumps(found)} -> {json.dumps(value)} ({engine_key})")
        _set(config, key, value)
    _derive_batch(train, world_size, config, out)
    for key, value in _hf_fills(train, hidden, warmup_steps, total_steps).items():
        if _get(config, key) == AUTO:
            _set(config, key, value)
    _check_engine_knobs(train, config, out)
    out.problems += [f'{key} is "auto" but nothing in the trial fills it; give it a value'
                     for key in _autos(config)]
    _engine_needs(train, config)
    return out


def _derive_batch(train, world_size: int, config: Dict[str, Any], out: Resolved) -> None:
    product = train.micro_batch * train.accum_steps * world_size
    given = config.get("train_batch_size")
    if given not in (None, AUTO) and given != product:
        out.problems.append(
            f"train_batch_size={given} but train.micro_batch x train.accum_steps x train.world_size = "
            f"{train.micro_batch} x {train.accum_steps} x {world_size} = {product}; choose them so that the "
            f'product is {given}, or set train_batch_size to "auto"')
    config["train_batch_size"] = product


def _check_engine_knobs(train, config: Dict[str, Any], out: Resolved) -> None:
    """The JSON's zero_optimization fields stand, unless the trial set the engine's own knob
    away from its default to something else: then the two contradict."""
    zero = config.setdefault("zero_optimization", {})
    for name, default in ENGINE_ZERO_KNOBS:
        mine = getattr(train, name)
        if name not in zero:
            zero[name] = mine
        elif mine != default and zero[name] != mine:
            out.problems.append(f"zero_optimization.{name}={json.dumps(zero[name])} but train.{name}={mine}; "
                                f"drop one of them")
    section = config.get("activation_checkpointing") or {}
    if not train.activation_checkpointing and any(section.get(k) for k in ("partition_activations",
                                                                           "cpu_checkpointing")):
        on = [k for k in ("partition_activations", "cpu_checkpointing") if section.get(k)]
        out.problems.append(f"activation_checkpointing.{on[0]}=true but train.activation_checkpointing=false, "
                            f"so no activation is checkpointed; set train.activation_checkpointing=true")


def _engine_needs(train, config: Dict[str, Any]) -> None:
    if "optimizer" not in config:                  # the engine passes torch's AdamW
        config.setdefault("zero_allow_untested_optimizer", True)
    config.setdefault("gradient_clipping", 0.0)
    config.setdefault("steps_per_print", 10**9)
    config.setdefault("wall_clock_breakdown", False)
    if train.activation_checkpointing:
        config.setdefault("activation_checkpointing", {"partition_activations": False, "cpu_checkpointing": False,
                                                       "contiguous_memory_optimization": False})


def trial_config(train, world_size: int, hidden: int, warmup_steps: int, total_steps: int) -> Resolved:
    """The config a trial runs: the resolved JSON, or the engine's own."""
    if not train.deepspeed_config:
        return Resolved(engine_config(train, world_size))
    return resolve(train, world_size, load_json(train.deepspeed_config), hidden, warmup_steps, total_steps)


def fp16_refused_on_cpu(cpu_flags: set) -> bool:
    """DeepSpeed's CPU accelerator allows fp16 only where oneDNN has fp16 (its is_fp16_supported()
    asks torch.ops.mkldnn._is_mkldnn_fp16_supported(), which needs AVX512-FP16 or AMX-FP16 on
    x86, half-precision arithmetic on Arm)."""
    return not cpu_flags & {"avx512_fp16", "amx_fp16", "fphp", "asimdhp"}


def cpu_flags() -> set:
    """This machine's CPU feature flags (Linux /proc/cpuinfo); empty where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith(("flags", "features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# -- dotted keys into nested dicts ----------------------------------------------------
def _get(config: Dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(config: Dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _autos(node: Any, prefix: str = "") -> List[str]:
    if isinstance(node, dict):
        return [k for key, value in node.items() for k in _autos(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")] if node == AUTO else []
