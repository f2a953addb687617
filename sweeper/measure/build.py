"""Builds the real probe's parts from a ProbeConfig and the trial's resolved device."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from sweeper.measure.memory import CudaMemory, TreeMemory
from sweeper.measure.profiles import make_profile
from sweeper.measure.rules import GrowthRule, SettleRule
from sweeper.measure.sampler import Nvml, ProcessTree, Sampler, nvml_handle
from sweeper.measure.timers import CudaTimer


def is_cuda(device: Any) -> bool:
    return str(device).startswith("cuda")


def probe_parts(cfg: Any, device: str, warmup_steps: int,
                out_dir: Optional[Path]) -> Tuple[Dict[str, Any], List[str]]:
    """Keyword arguments for Probe(...), and warnings about parts that could not be had."""
    cuda, warnings = is_cuda(device), []
    memory = TreeMemory()
    parts: Dict[str, Any] = {"memory": memory, "memory_every": cfg.memory_every,
                             "growth": GrowthRule(mb_per_100_steps=cfg.growth_mb_per_100_steps)}
    if cfg.settle:
        parts["settle"] = SettleRule(cfg.settle_window, cfg.settle_tolerance, warmup_steps, cfg.settle_max_steps)
    if cuda:
        import torch.cuda.nvtx as nvtx

        parts.update(timer=CudaTimer(), cuda_memory=CudaMemory(device), nvtx=nvtx)
    if cfg.sample_hz > 0 or cfg.memory_every > 0:
        # memory readings take milliseconds, so they always go to the sampler's own thread,
        # even when utilisation sampling is off (then the sampler has no sources)
        sources = _sources(device, warnings, memory.exclude_pids) if cfg.sample_hz > 0 else []
        parts["sampler"] = Sampler(sources, cfg.sample_hz or 1.0)
    wait = warmup_steps if cfg.profile_wait is None else cfg.profile_wait
    parts["profile"] = make_profile(cfg.profile, out_dir, wait, cfg.profile_warmup, cfg.profile_active, cuda,
                                    on_pid=memory.exclude_pids.add)
    return parts, warnings


def _sources(device: str, warnings: List[str], exclude_pids: set) -> List[Any]:
    sources: List[Any] = [ProcessTree(exclude_pids=exclude_pids)]
    if not is_cuda(device):
        return sources
    try:
        import torch

        sources.append(Nvml(nvml_handle(torch.device(device).index or 0)))
    except ImportError:
        warnings.append("probe: nvidia-ml-py is not installed (pip install nvidia-ml-py); "
                        "no GPU utilisation, clock, temperature or power columns")
    except Exception as exc:   # no NVML library, no permission: the trial still runs
        warnings.append(f"probe: NVML unavailable ({type(exc).__name__}: {exc}); no GPU utilisation columns")
    return sources
