"""The fleet: one cell on every GPU (or every node) of a host or cluster, each device
against its peers (resources.every_device=true).

A device is a GPU, named by its UUID from the trial's fingerprint, or for a CPU trial the
Ray node it ran on. Each device's repeats (items/s) are compared with its peers' repeats
pooled, by the same Mann-Whitney test, Holm correction across the cell's devices and
minimum effect that judge cells against the baseline (sweeper.analysis.stats). A device
is an outlier when it is significantly slower AND slower by more than analysis.min_effect.
Its mean SM clock, temperature and power (NVML, from the probe's sampler) stand beside it,
NaN where there is no GPU, so a throttling GPU shows why it is slow.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Sequence

import numpy as np
import pandas as pd

from sweeper.analysis import stats
from sweeper.schema import AnalysisConfig

# The probe's sampled means of a trial (sweeper/probe.py `_column_figures`), shown beside each device.
SENSORS = (("gpu_sm_clock_mhz_mean", "sm_clock_mhz"), ("gpu_temp_c_mean", "temp_c"),
           ("gpu_power_w_mean", "power_w"))
COLUMNS = ["cell_id", "device", "node", "host", "gpu_uuid", "repeats", "items_per_s", "peers_items_per_s",
           "ratio", "p", "p_adj", "verdict", "outlier", *(name for _, name in SENSORS)]


def device_of(record: Dict[str, Any]) -> Dict[str, Any]:
    """Where a trial ran: its node (Ray's id, else the host), host and, for a GPU trial,
    its GPU's UUID; `device` is the UUID, else the node."""
    fp = record.get("fingerprint") or {}
    node = fp.get("ray_node_id") or fp.get("host") or "?"
    on_gpu = float((record.get("resources") or {}).get("num_gpus") or 0) > 0
    uuid = fp.get("gpu_uuid") if on_gpu else None
    return {"device": uuid or node, "node": node, "host": fp.get("host"), "gpu_uuid": uuid}


def _trial_rows(records: Sequence[Dict[str, Any]], repeats: pd.DataFrame) -> pd.DataFrame:
    rate = dict(zip(repeats["trial_id"], repeats["items_per_s"])) if not repeats.empty else {}
    rows = []
    for r in records:
        if r.get("status") != "ok" or r["trial_id"] not in rate:
            continue
        summary = r.get("summary") or {}
        rows.append({"cell_id": r.get("cell_id"), "items_per_s": rate[r["trial_id"]], **device_of(r),
                     **{name: _float(summary.get(key)) for key, name in SENSORS}})
    return pd.DataFrame(rows)


def fleet_table(records: Sequence[Dict[str, Any]], repeats: pd.DataFrame, cfg: AnalysisConfig,
                seed: int = 0) -> pd.DataFrame:
    """One row per (cell, device) of every cell that ran on two devices or more; empty otherwise."""
    trials = _trial_rows(records, repeats)
    if trials.empty:
        return pd.DataFrame(columns=COLUMNS)
    out = [_cell_rows(cell, group, cfg, seed) for cell, group in trials.groupby("cell_id", sort=False)
           if group["device"].nunique() >= 2]
    return pd.concat(out, ignore_index=True)[COLUMNS] if out else pd.DataFrame(columns=COLUMNS)


def _cell_rows(cell_id: str, trials: pd.DataFrame, cfg: AnalysisConfig, seed: int) -> pd.DataFrame:
    """Each device of one cell against its peers pooled; Holm across the cell's devices."""
    devices = list(dict.fromkeys(trials["device"]))
    comparisons = [stats.compare_cells(trials.loc[trials["device"] != d, "items_per_s"],
                                       trials.loc[trials["device"] == d, "items_per_s"], cfg.alpha,
                                       cfg.min_effect, seed=seed, higher_is_better=True) for d in devices]
    comparisons = stats.apply_holm(comparisons)
    rows = []
    for device, c in zip(devices, comparisons):
        mine, peers = trials[trials["device"] == device], trials[trials["device"] != device]
        rows.append({"cell_id": cell_id, "device": device, **mine.iloc[0][["node", "host", "gpu_uuid"]].to_dict(),
                     "repeats": len(mine), "items_per_s": float(np.median(mine["items_per_s"])),
                     "peers_items_per_s": float(np.median(peers["items_per_s"])), "ratio": c.ratio,
                     "p": c.p_value, "p_adj": c.p_adjusted, "verdict": c.verdict,
                     "outlier": c.verdict == stats.SLOWER,
                     **{name: float(mine[name].mean()) for _, name in SENSORS}})
    return pd.DataFrame(rows)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan

