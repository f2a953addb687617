"""A model of your own for the training-step engine, in nanoGPT's layout (docs/train_step.md).

    PYTHONPATH=examples/user_model python -m sweeper +sweep=train_step train.model=nanogpt_style:gpt
    PYTHONPATH=examples/user_model python -m sweeper +sweep=zero train.model=nanogpt_style:hf_style \
        train.preset=gpt2-124m train.micro_batch=16 train.precision=bf16 train.world_size=2   # a GPU host

`gpt(train)` builds a GPT-2-style decoder of the trial's shape (`train.shape()`: the preset's,
or train.n_layer/n_head/n_embd/seq_len/vocab_size) and returns nanoGPT's `(logits, loss)`;
`hf_style(train)` wraps it to return a Hugging Face-style output with `.loss`. Its blocks are
`transformer.h`, an nn.ModuleList: the engine checkpoints and shards each of them. The
vocabulary is padded to a multiple of 64 as nanoGPT does (50257 -> 50304: the head's matrix
products are much faster), which the engine's preset does too, and it draws its initial weights
in the preset's order, so with the same seed its losses equal the preset's.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(d, 4 * d), c_proj=nn.Linear(4 * d, d)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer: int, n_head: int, d: int, seq_len: int, vocab: int):
        super().__init__()
        vocab = (vocab + 63) // 64 * 64
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(seq_len, d),
            h=nn.ModuleList(Block(d, n_head) for _ in range(n_layer)), ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight          # tied, as GPT-2
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in t.h:
            x = block(x)
        logits = self.lm_head(t.ln_f(x))
        if logits.device.type != "cuda" or not torch.is_autocast_enabled("cuda"):
            logits = logits.float()       # CUDA autocast computes cross_entropy in fp32 by itself
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


def gpt(train) -> GPT:
    """The factory: train.model=nanogpt_style:gpt."""
    s = train.shape()
    return GPT(s["n_layer"], s["n_head"], s["n_embd"], s["seq_len"], s["vocab_size"])


@dataclass
class CausalLMOutput:
    loss: torch.Tensor
    logits: torch.Tensor


class HFStyle(nn.Module):
    """The same model returning a Hugging Face-style output (`.loss`)."""

    def __init__(self, inner: GPT):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, labels):
        logits, loss = self.inner(input_ids, labels)
        return CausalLMOutput(loss=loss, logits=logits)


def hf_style(train) -> HFStyle:
    """The factory: train.model=nanogpt_style:hf_style."""
    return HFStyle(gpt(train))
