"""The model a microbenchmark times: a preset of workloads/model.py's GPT, or a user's
module built by `package.module:factory` (the factory gets the workload's params section
as a dict and returns a torch.nn.Module that takes (batch, seq_len) int64 token ids).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import torch

from sweeper.errors import ConfigError
from workloads.model import GPT, ModelShape
from workloads.user_model import import_path
from workloads.playbook.specs import AUTO, MODEL_PRESETS, by_device


def load_factory(path: str, key: str) -> Callable[..., Any]:
    """`package.module:factory` -> the factory, through the training step's one import-path resolver."""
    factory = import_path(path, key)
    if not callable(factory):
        raise ConfigError(f"{key}={path!r}: {path.partition(':')[2]!r} is not callable")
    return factory


def model_name(params: Dict[str, Any], device: str) -> str:
    return by_device(params.get("model", AUTO), device, "gpt2-124m", "small")


def build(params: Dict[str, Any], device: str, where: Any = None) -> Tuple[torch.nn.Module, int]:
    """(module on `where` or the device, vocabulary size for its token ids)."""
    name = model_name(params, device)
    target = torch.device(where or device)
    if name in MODEL_PRESETS:
        shape = MODEL_PRESETS[name]
        with target:
            return GPT(ModelShape(**shape)), shape["vocab_size"]
    module = load_factory(name, "workload.params.model")(dict(params))
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"workload.params.model={name!r}: the factory returned {type(module).__name__}, "
                          f"not a torch.nn.Module")
    return module.to(target), params.get("vocab_size") or 512


def max_seq_len(model: torch.nn.Module) -> int:
    return model.shape.seq_len if isinstance(model, GPT) else 1 << 30


def loss_of(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """The preset GPT takes (idx, targets) and returns its loss; a user's module takes the
    tokens, and the mean of its output stands for a loss."""
    if isinstance(model, GPT):
        return model(tokens, tokens)
    out = model(tokens)
    out = out[0] if isinstance(out, (tuple, list)) else out
    return out.float().mean()


def autocast(device: str, precision: str):
    dtype = torch.bfloat16 if precision == "bf16" else None
    return torch.autocast(device_type=device, dtype=dtype, enabled=dtype is not None)
