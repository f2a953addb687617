"""A GPT-style decoder, after nanoGPT's model.py: pre-norm blocks, causal SDPA
attention, a 4x GELU MLP, token embeddings tied to the output head.

    model = GPT(ModelShape(n_layer=12, n_head=12, n_embd=768, seq_len=1024, vocab_size=50257))
    loss = model(idx, targets)          # idx, targets: (B, T) int64

Shapes come from `sweeper.schema.TRAIN_PRESETS` (tiny, gpt2-124m) through
`TrainConfig.shape()`. Activation checkpointing (`checkpoint_blocks`) wraps each
block in a module of its own, so FSDP can shard the wrapper (as torchtitan does) and
recomputation happens inside it; the engine does the same to a user's model
(workloads/user_model.py). No distributed code lives here.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

CheckpointFn = Callable[..., torch.Tensor]   # (module, x) -> y, recomputed in backward


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_head: int
    n_embd: int
    seq_len: int
    vocab_size: int

    @property
    def padded_vocab(self) -> int:
        """The vocabulary rounded up to a multiple of 64, as nanoGPT does: with 50257 the head's
        matrix products fell back to slow kernels (72.6 ms a GPT-2 step on an H200, 47.0 padded)."""
        return (self.vocab_size + 63) // 64 * 64


class CausalSelfAttention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.n_head = shape.n_head
        self.c_attn = nn.Linear(shape.n_embd, 3 * shape.n_embd)
        self.c_proj = nn.Linear(shape.n_embd, shape.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.c_fc = nn.Linear(shape.n_embd, 4 * shape.n_embd)
        self.c_proj = nn.Linear(4 * shape.n_embd, shape.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.ln_1 = nn.LayerNorm(shape.n_embd)
        self.attn = CausalSelfAttention(shape)
        self.ln_2 = nn.LayerNorm(shape.n_embd)
        self.mlp = MLP(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def torch_checkpoint(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    from torch.utils.checkpoint import checkpoint

    return checkpoint(module, x, use_reentrant=False)


class Checkpointed(nn.Module):
    """A block whose activations are recomputed in backward instead of kept. Positional
    arguments go through the checkpoint function (DeepSpeed's takes no keywords); keyword
    arguments, such as a user block's attention mask, are bound to the block first."""

    def __init__(self, block: nn.Module, checkpoint_fn: CheckpointFn = torch_checkpoint):
        super().__init__()
        self.block = block
        self.checkpoint_fn = checkpoint_fn

    def forward(self, *args, **kwargs):
        fn = functools.partial(self.block, **kwargs) if kwargs else self.block
        return self.checkpoint_fn(fn, *args)


def checkpoint_blocks(blocks: nn.ModuleList, checkpoint_fn: CheckpointFn) -> None:
    """Wraps each block of the list, in place, so that its activations are recomputed."""
    for i, block in enumerate(blocks):
        if not isinstance(block, Checkpointed):
            blocks[i] = Checkpointed(block, checkpoint_fn)


class GPT(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.padded_vocab, shape.n_embd)
        self.wpe = nn.Embedding(shape.seq_len, shape.n_embd)
        self.h = nn.ModuleList(Block(shape) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.n_embd)
        self.lm_head = nn.Linear(shape.n_embd, shape.padded_vocab, bias=False)
        self.lm_head.weight = self.wte.weight           # weight tying, as GPT-2
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):          # GPT-2's scaled init of residual projections
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * shape.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if logits.device.type != "cuda" or not torch.is_autocast_enabled("cuda"):
            # CUDA autocast computes cross_entropy in fp32 by itself; an explicit .float() there
            # cost 3.7 ms and 1.6 GB a GPT-2 step on an H200 (benchmarks/gpu_zero_diag.py)
            logits = logits.float()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def num_params(shape: ModelShape, non_embedding: bool = True) -> int:
    """Parameter count from the shape alone (tied head counted once), as nanoGPT's
    get_num_params: the position embeddings are left out for the FLOP count."""
    d, L = shape.n_embd, shape.n_layer
    per_block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    total = shape.vocab_size * d + shape.seq_len * d + L * per_block + 2 * d
    return total - shape.seq_len * d if non_embedding else total


def flops_per_token(shape: ModelShape) -> float:
    """Training FLOPs per token of the preset's GPT (position embeddings left out of N)."""
    return estimate_flops_per_token(num_params(shape), shape.n_layer, shape.n_embd, shape.seq_len)


def estimate_flops_per_token(n_params: int, n_layer: int, n_embd: int, seq_len: int) -> float:
    """Training FLOPs per token, PaLM appendix B / nanoGPT estimate_mfu:
    6 N (forward + backward through the weights) + 12 L H Q T (attention scores and values, H Q = n_embd).
    The one estimate for the presets and for a user's model (N counted from its parameters)."""
    return 6.0 * n_params + 12.0 * n_layer * n_embd * seq_len
