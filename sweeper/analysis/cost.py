"""Cost per million tokens or samples, and scaling efficiency across world sizes, per cell.

Cost (`cost.gpu_hour_usd`, `cost.cpu_hour_usd`):

    usd_per_hour   = GPUs the trial held x the price of its GPU model     (a GPU trial)
                   = CPUs the trial asked for x cpu_hour_usd             (a CPU trial)
    usd_per_m_<u>  = usd_per_hour / 3600 / (<u> per second) x 1e6

where <u> is tokens when the cell recorded `tokens_per_s` (the training step), else the
workload's own items (samples for the loaders), at the cell's median throughput. The GPU
model is the fingerprint's `gpu_name`, priced by an exact key, else by the first key that
is a substring of it ({"H200": 3.5} prices "NVIDIA H200"). A GPU trial's host CPUs are in
its GPU price, as cloud GPU-hour prices include them.

Scaling efficiency (a swept `*.world_size` axis): per-rank throughput of a cell against
the world-size-1 cell of the same other settings,

    scaling_efficiency = (items_per_s / world_size) / items_per_s at world size 1

1.0 is perfect scaling. Pure over the cells frame and plain values.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

SECONDS_PER_HOUR = 3600.0


def gpu_price(prices: Mapping[str, float], gpu_name: Optional[str]) -> Optional[float]:
    """USD per GPU-hour of `gpu_name`: its exact key, else the first key contained in it."""
    if not gpu_name or not prices:
        return None
    if gpu_name in prices:
        return float(prices[gpu_name])
    found = [k for k in prices if str(k).lower() in gpu_name.lower()]
    return float(prices[max(found, key=len)]) if found else None   # the longest match: "H200 NVL" over "H200"


def unpriced_line(prices: Mapping[str, float], models: Sequence[str]) -> Optional[str]:
    """One line naming the GPU models that no key of cost.gpu_hour_usd prices, or None."""
    missing = sorted({m for m in models if gpu_price(prices, m) is None})
    if not prices or not missing:
        return None
    return (f"cost.gpu_hour_usd has no price for this machine's GPU {', '.join(map(repr, missing))} "
            f"(priced: {', '.join(map(str, prices))}); add '+cost.gpu_hour_usd={{{missing[0]}:PRICE}}' "
            f"or its cells will have no cost")


def trial_hourly(record: Mapping[str, Any], cost: Any) -> Tuple[Optional[float], Optional[str]]:
    """(USD per hour the trial's resources cost, why not when None)."""
    resources = record.get("resources") or {}
    gpus = float(resources.get("num_gpus") or 0)
    if gpus > 0:
        name = (record.get("fingerprint") or {}).get("gpu_name")
        price = gpu_price(cost.gpu_hour_usd or {}, name)
        if price is None:
            return None, f"no price in cost.gpu_hour_usd for GPU model {name!r}"
        return gpus * price, None
    if cost.cpu_hour_usd is None:
        return None, "a CPU trial and no cost.cpu_hour_usd"
    return float(resources.get("num_cpus") or 0) * float(cost.cpu_hour_usd), None


def cost_unit(cells: pd.DataFrame, items_label: str) -> Tuple[str, str]:
    """(rate column, unit): tokens_per_s / "tokens" when recorded, else items_per_s / the items' word."""
    if "tokens_per_s" in cells.columns and cells["tokens_per_s"].notna().any():
        return "tokens_per_s", "tokens"
    return "items_per_s", items_label


def cost_columns(cells: pd.DataFrame, records: Sequence[Mapping[str, Any]], cost: Any,
                 items_label: str) -> Tuple[pd.DataFrame, List[str], Optional[str]]:
    """(cells with usd_per_hour and usd_per_m_<unit>, notes, the cost column); unchanged without prices."""
    if cost is None or not cost.enabled or cells.empty:
        return cells, [], None
    rate, unit = cost_unit(cells, items_label)
    hourly: Dict[str, List[float]] = {}
    notes: List[str] = []
    for record in records:
        if record.get("status") != "ok":
            continue
        value, why = trial_hourly(record, cost)
        if value is None:
            line = f"cost: {why}; its cells have no cost (add the price to show it)"
            notes += [line] if line not in notes else []
            continue
        hourly.setdefault(str(record.get("cell_id")), []).append(value)
    column = f"usd_per_m_{unit}"
    per_hour = cells["cell_id"].map(lambda c: max(hourly[c]) if c in hourly else math.nan)
    cells = cells.assign(usd_per_hour=per_hour)
    cells[column] = per_hour / SECONDS_PER_HOUR / cells[rate].astype(float) * 1e6
    return cells, notes, column


def world_size_axis(axes: Sequence[str]) -> Optional[str]:
    return next((a for a in axes if str(a).split(".")[-1] == "world_size"), None)


def scaling_columns(cells: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """Cells with items_per_s_per_rank and scaling_efficiency, when world size is swept."""
    axis = world_size_axis(axes)
    if axis is None or cells.empty:
        return cells
    others = [a for a in axes if a != axis]
    world = pd.to_numeric(cells[axis], errors="coerce")
    per_rank = cells["items_per_s"].astype(float) / world
    key = cells[others].astype(str).agg("|".join, axis=1) if others else pd.Series("", index=cells.index)
    single = {k: r for k, w, r in zip(key, world, per_rank) if w == 1 and math.isfinite(r)}
    efficiency = [r / single[k] if k in single and single[k] > 0 else math.nan for k, r in zip(key, per_rank)]
    return cells.assign(items_per_s_per_rank=per_rank, scaling_efficiency=efficiency)
