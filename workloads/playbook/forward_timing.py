"""Model forward timing across batch shapes (batch x sequence length), for a preset of
workloads/model.py's GPT or a user's model (`workload.params.model=package.module:factory`).

Each step is one forward pass (no gradients) at (batch, seq_len), timed by the probe
(CUDA events on a GPU). With `shapes`, every [batch, seq_len] is timed too (median of 5
after 2 warm-ups). Figures: forward_ms (the steps' median), tokens_per_s, and per shape
forward_ms_b<B>_t<T> and tokens_per_s_b<B>_t<T>, and tokens_per_s_largest / _smallest (by
tokens; the spec's pair). On a GPU the default is GPT-2 124M in bf16.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List

import torch

from workloads.playbook import models
from workloads.playbook.h2d_copy import median_seconds
from workloads.playbook.specs import FORWARD_TIMING as SPEC, ForwardParams, by_device  # noqa: F401
from sweeper.spec import typed_params

SHAPE_REPEATS = 5


def tokens(batch: int, seq_len: int, vocab: int, device: torch.device) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq_len), device=device)


def run(cfg, probe) -> Dict[str, Any]:
    params = typed_params(ForwardParams, cfg.workload.params)
    device = torch.device(cfg.workload.device)
    kind = device.type
    batch, seq_len = int(by_device(params.batch, kind, 16, 4)), int(by_device(params.seq_len, kind, 1024, 64))
    shapes: List[List[int]] = by_device(params.shapes, kind, [[1, 128], [8, 512], [16, 1024], [32, 1024]],
                                        [[1, 16], [16, 64]])
    precision = by_device(params.precision, kind, "bf16", "fp32")
    model, vocab = models.build(cfg.workload.params, kind)
    model.eval()
    limit = models.max_seq_len(model)
    if seq_len > limit or any(t > limit for _, t in shapes):
        raise ValueError(f"workload.params.seq_len/shapes: the model takes at most {limit} positions")
    x = tokens(batch, seq_len, vocab, device)
    with torch.no_grad(), models.autocast(kind, precision):
        while probe.more(cfg.workload.steps):
            with probe.step(items=batch * seq_len):
                with probe.phase("forward"):
                    models.loss_of(model, x)
        forward_s = statistics.median(r["step_s"] for r in probe.measured())
        out: Dict[str, Any] = {"forward_ms": forward_s * 1e3, "tokens_per_s": batch * seq_len / forward_s,
                               "model": models.model_name(cfg.workload.params, kind), "precision": precision,
                               "batch": batch, "seq_len": seq_len}
        for b, t in shapes:
            out.update(shape_figures(model, tokens(b, t, vocab, device), device))
    return {**out, **extremes(shapes, out)}


def extremes(shapes: List[List[int]], figures: Dict[str, Any]) -> Dict[str, float]:
    """tokens/s of the largest and the smallest shape (by tokens): the pair the views compare."""
    if not shapes:
        return {}
    by_size = sorted(shapes, key=lambda s: s[0] * s[1])
    return {f"tokens_per_s_{end}": figures[f"tokens_per_s_b{b}_t{t}"]
            for end, (b, t) in (("smallest", by_size[0]), ("largest", by_size[-1]))}


def shape_figures(model: torch.nn.Module, x: torch.Tensor, device: torch.device) -> Dict[str, float]:
    b, t = x.shape
    for _ in range(2):
        models.loss_of(model, x)
    seconds = median_seconds(lambda: models.loss_of(model, x), device, SHAPE_REPEATS)
    return {f"forward_ms_b{b}_t{t}": seconds * 1e3, f"tokens_per_s_b{b}_t{t}": b * t / seconds}
