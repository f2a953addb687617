"""Cells: the repeats of one grid point, their statistics, and verdicts against the baseline.

A cell is one grid point (`cell_id`); each of its repeats is one trial process.
The repeat is the unit of evidence (see stats.py): a cell is compared with the
baseline over per-repeat p50 and p95 step times, Holm-adjusted across cells, and
judged faster / slower / no detectable change / too few repeats. The noise floor
is the baseline against itself: its repeats split into two interleaved halves.

Pure over DataFrames (the summary and the steps of `sweeper.results.load`); only
`load_run` reads files. Imports no Ray, torch or W&B.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from sweeper.analysis import stats
from sweeper.schema import AnalysisConfig

BASELINE = "baseline"
FAILED = "failed"
METRICS = ("p50", "p95")
# Cell statistics with a bootstrap interval, over the cell's pooled measured steps.
CELL_STATISTICS = ("p50", "p95", "mean", "std", "cv")


@dataclass
class RunData:
    """One run folder: the summary (one row per trial), its measured steps, the records."""
    path: Path
    summary: pd.DataFrame
    steps: pd.DataFrame
    records: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class Analysis:
    metric: str
    baseline_id: Optional[str]
    axes: List[str]
    repeats: pd.DataFrame        # one row per finished trial: its p50, p95, throughput
    cells: pd.DataFrame          # one row per cell: statistics with intervals
    verdicts: pd.DataFrame       # one row per cell: against the baseline
    noise_floor: Optional[stats.Comparison]
    notes: List[str]


# --------------------------------------------------------------------------- loading


def load_run(path) -> RunData:
    """A run folder as frames; trial-level figures and start times join the summary."""
    from sweeper.results import load, read_records

    records = read_records(Path(path))
    summary, steps = load(path, records)
    return RunData(Path(path), with_record_fields(summary, records), steps, records)


def with_record_fields(summary: pd.DataFrame, records: Sequence[Dict[str, Any]]) -> pd.DataFrame:
    """Adds started_at, the workload's figures and the probe's memory maxima that the summary lacks."""
    extra = {}
    for record in records:
        memory = {k: v for k, v in (record.get("summary") or {}).items() if k.startswith(("mem_", "gpu_mem_"))}
        row = {k: v for k, v in {**(record.get("figures") or {}), **memory}.items()
               if k not in summary.columns and isinstance(v, (int, float, bool, str))}
        row["started_at"] = record.get("started_at")
        extra[record["trial_id"]] = row
    if summary.empty or not extra:
        return summary
    frame = pd.DataFrame.from_dict(extra, orient="index")
    frame = frame[[c for c in frame.columns if c not in summary.columns]]
    return summary.join(frame, on="trial_id")


# --------------------------------------------------------------------------- shape of a run


def normalise(summary: pd.DataFrame) -> pd.DataFrame:
    """Summary with cell_id, repeat and is_baseline, even from records older than repeats."""
    frame = summary.copy()
    if "cell_id" not in frame.columns or frame["cell_id"].isna().all():
        frame["cell_id"] = frame["trial_id"].astype(str).str.split("-").str[0]
    frame["cell_id"] = frame["cell_id"].fillna(frame["trial_id"].astype(str).str.split("-").str[0])
    frame["repeat"] = frame["repeat"].fillna(0).astype(int) if "repeat" in frame else 0
    frame["is_baseline"] = frame["is_baseline"].fillna(False).astype(bool) if "is_baseline" in frame else False
    return frame


def swept_axes(summary: pd.DataFrame) -> List[str]:
    """The sweep's axes: the summary's dotted columns (data.num_workers, ...), in order."""
    return [c for c in summary.columns if "." in str(c)]


def cell_label(values: Dict[str, Any]) -> str:
    return " ".join(f"{str(k).rsplit('.', 1)[-1]}={value_text(v)}" for k, v in values.items())


def value_text(value: Any) -> str:
    """A swept value as the report prints it: 2.0 -> "2", None or NaN -> "-"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _matches(row: pd.Series, wanted: Dict[str, str], axes: Sequence[str]) -> bool:
    for key, value in wanted.items():
        column = key if key in row.index else next((a for a in axes if a.rsplit(".", 1)[-1] == key), None)
        if column is None or value_text(row[column]).lower() != value.lower():
            return False
    return True


def pick_baseline(cells: pd.DataFrame, spec: Optional[str], axes: Sequence[str]) -> tuple[Optional[str], List[str]]:
    """(baseline cell_id, notes): the cell `spec` names, else the one the plan marked, else the first."""
    if cells.empty:
        return None, []
    if spec:
        wanted = dict(token.split("=", 1) for token in spec.split())
        found = [row["cell_id"] for _, row in cells.iterrows() if _matches(row, wanted, axes)]
        if found:
            return found[0], []
        return None, [f"analysis.baseline={spec!r} matches no cell of this run; no verdicts"]
    marked = cells.loc[cells["is_baseline"], "cell_id"]
    if len(marked):
        return str(marked.iloc[0]), []
    return str(cells["cell_id"].iloc[0]), ["no cell is marked as the baseline: the first cell is used"]


# --------------------------------------------------------------------------- per repeat


def _measured(steps: pd.DataFrame) -> pd.DataFrame:
    if steps.empty or "step_s" not in steps.columns:
        return pd.DataFrame(columns=["trial_id", "step_s"])
    return steps[~steps["warmup"].astype(bool)] if "warmup" in steps.columns else steps


def repeat_table(summary: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per finished trial: cell, repeat, p50, p95, mean step time, items/s.

    From the trial's measured steps when they are there, else from its summary row.
    """
    summary = normalise(summary)
    ok = summary[summary["status"] == "ok"]
    by_trial = {k: g for k, g in _measured(steps).groupby("trial_id")} if not steps.empty else {}
    rows = []
    for row in ok.to_dict("records"):
        rows.append({"trial_id": row["trial_id"], "cell_id": row["cell_id"], "repeat": row["repeat"],
                     "is_baseline": row["is_baseline"], "started_at": row.get("started_at"),
                     **_repeat_figures(row, by_trial.get(row["trial_id"]))})
    columns = ["trial_id", "cell_id", "repeat", "is_baseline", "started_at", "p50", "p95", "mean",
               "items_per_s", "steps"]
    return pd.DataFrame(rows, columns=columns)


def _repeat_figures(row: Dict[str, Any], steps: Optional[pd.DataFrame]) -> Dict[str, float]:
    if steps is None or steps.empty:
        return {"p50": _float(row.get("step_p50_s")), "p95": _float(row.get("step_p95_s")),
                "mean": _float(row.get("step_mean_s")), "items_per_s": _float(row.get("items_per_s")),
                "steps": _float(row.get("steps"))}
    seconds = steps["step_s"].to_numpy(dtype=float)
    items = steps["items"].to_numpy(dtype=float) if "items" in steps.columns else np.full(seconds.size, np.nan)
    rate = float(np.sum(items) / np.sum(seconds)) if not np.isnan(items).any() and seconds.sum() > 0 else math.nan
    return {"p50": stats.percentile(seconds, 50), "p95": stats.percentile(seconds, 95),
            "mean": float(np.mean(seconds)), "items_per_s": rate, "steps": float(seconds.size)}


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# --------------------------------------------------------------------------- per cell


def cell_table(summary: pd.DataFrame, steps: pd.DataFrame, n_resamples: int = 2000,
               seed: int = 0) -> pd.DataFrame:
    """One row per cell: swept values, repeats, and p50/p95/mean/std/CV and items/s with intervals.

    Intervals come from a two-level bootstrap (repeats, then steps) with 2 or more
    repeats (`ci_over` = "repeats"); with one repeat they cover that process's step
    noise only (`ci_over` = "steps") and are too narrow to compare cells with.
    """
    summary = normalise(summary)
    axes = swept_axes(summary)
    measured = _measured(steps)
    by_trial = dict(tuple(measured.groupby("trial_id"))) if not measured.empty else {}   # once, not per cell
    rows = []
    for cell_id, trials in summary.groupby("cell_id", sort=False):
        ok = trials[trials["status"] == "ok"]
        groups = [by_trial[t] for t in sorted(set(ok["trial_id"])) if t in by_trial]
        per_repeat = [g["step_s"].to_numpy(float) for g in groups]
        items = [g["items"].to_numpy(float) if "items" in g else np.full(len(g), np.nan) for g in groups]
        row = {"cell_id": cell_id, "cell": cell_label({a: trials[a].iloc[0] for a in axes}) or cell_id,
               **{a: trials[a].iloc[0] for a in axes}, "is_baseline": bool(trials["is_baseline"].any()),
               "repeats": len(ok), "failed": int(len(trials) - len(ok))}
        row.update(_cell_statistics(per_repeat, items, ok, n_resamples, seed))
        row.update(_resource_columns(trials, by_trial))
        rows.append(row)
    return pd.DataFrame(rows)


def _cell_statistics(per_repeat, items, ok: pd.DataFrame, n_resamples: int, seed: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"steps": int(sum(r.size for r in per_repeat))}
    if not per_repeat:   # no steps on disk: the summary's figures, without intervals
        for name in ("p50", "p95", "mean"):
            out[name] = float(ok[f"step_{name}_s"].astype(float).median()) if len(ok) else math.nan
        out["items_per_s"] = float(ok["items_per_s"].astype(float).median()) if len(ok) else math.nan
        out["ci_over"] = "none"
        return out
    over_repeats = len(per_repeat) >= 2
    pooled = stats.hierarchical_cis(per_repeat, CELL_STATISTICS, n_resamples=n_resamples, seed=seed) \
        if over_repeats else {}
    for name in CELL_STATISTICS:
        if over_repeats:
            point, low, high = pooled[name]
        else:
            point = _point(per_repeat[0], name)
            low, high = stats.bootstrap_ci(per_repeat[0], name, n_resamples=n_resamples, seed=seed)
        out.update({name: point, f"{name}_low": low, f"{name}_high": high})
    if over_repeats:
        rate = stats.hierarchical_throughput_ci(per_repeat, items, n_resamples=n_resamples, seed=seed)
    else:
        rate = stats.throughput_ci(per_repeat[0], items[0], n_resamples=n_resamples, seed=seed)
    out.update({"items_per_s": rate[0], "items_per_s_low": rate[1], "items_per_s_high": rate[2],
                "ci_over": "repeats" if over_repeats else "steps"})
    return out


def _point(samples: np.ndarray, name: str) -> float:
    s = stats.describe(samples)
    return {"p50": s.p50, "p95": s.p95, "mean": s.mean, "std": s.std, "cv": s.cv}[name]


# Peak memory, in GB (1e9 bytes), from the first source a trial has:
#   GPU:  the probe's CUDA peak (gpu_mem_peak_reserved_mb: what the allocator held), or a
#         workload figure peak_gpu_mem_gb;
#   host: the largest per-step sum of PSS over the trial process and its DataLoader
#         workers (mem_main_pss_mb + mem_workers_pss_mb; PSS splits shared pages, so it
#         adds up), else the sum of their maxima (an upper bound), else peak_host_mem_gb.
GPU_MEMORY_MB = ("gpu_mem_peak_reserved_mb", "gpu_mem_peak_allocated_mb")
HOST_MEMORY_MB = ("mem_main_pss_mb", "mem_workers_pss_mb")


def trial_memory(row: pd.Series, steps: Optional[pd.DataFrame]) -> Dict[str, float]:
    """{"gpu_mem_gb", "host_mem_gb"} of one trial (NaN when not recorded)."""
    steps = steps if steps is not None else pd.DataFrame()
    main, workers = HOST_MEMORY_MB
    per_step = math.nan
    if main in steps.columns and steps[main].notna().any():
        extra = steps[workers].fillna(0.0) if workers in steps.columns else 0.0
        per_step = float((steps[main] + extra).max())
    maxima = _float(row.get(f"{main}_max")) + float(np.nan_to_num(_float(row.get(f"{workers}_max"))))
    host = _first(per_step / 1e3, maxima / 1e3, _float(row.get("peak_host_mem_gb")))
    gpu = _first(*(_steps_max(steps, c) / 1e3 for c in GPU_MEMORY_MB),
                 *(_float(row.get(f"{c}_max")) / 1e3 for c in GPU_MEMORY_MB), _float(row.get("peak_gpu_mem_gb")))
    return {"gpu_mem_gb": gpu, "host_mem_gb": host}


def _first(*values: float) -> float:
    return next((v for v in values if not math.isnan(v)), math.nan)


def _steps_max(steps: pd.DataFrame, column: str) -> float:
    return float(steps[column].max()) if column in steps.columns and steps[column].notna().any() else math.nan


def _resource_columns(trials: pd.DataFrame, by_trial: Dict[str, pd.DataFrame]) -> Dict[str, float]:
    """Per cell, the worst repeat's peak memory (GB) and the CPUs the trial asked for."""
    ok = trials[trials["status"] == "ok"]
    memory = [trial_memory(row, by_trial.get(row["trial_id"])) for _, row in ok.iterrows()]
    out = {}
    for name in ("gpu_mem_gb", "host_mem_gb"):
        values = [m[name] for m in memory if not math.isnan(m[name])]
        if values:
            out[name] = float(max(values))
    if "num_cpus" in trials.columns and trials["num_cpus"].notna().any():
        out["num_cpus"] = float(trials["num_cpus"].astype(float).max())
    return out


# --------------------------------------------------------------------------- verdicts


def _values(repeats: pd.DataFrame, cell_id: str, metric: str) -> np.ndarray:
    return repeats.loc[repeats["cell_id"] == cell_id, metric].to_numpy(dtype=float)


def compare_with_baseline(repeats: pd.DataFrame, cells: Sequence[str], baseline_id: str,
                          cfg: AnalysisConfig, metric: str, seed: int = 0) -> Dict[str, stats.Comparison]:
    """Each cell against the baseline over per-repeat values of `metric`, Holm across cells."""
    base = _values(repeats, baseline_id, metric)
    others = [c for c in cells if c != baseline_id]
    raw = [stats.compare_cells(base, _values(repeats, c, metric), cfg.alpha, cfg.min_effect, seed=seed)
           for c in others]
    adjusted = stats.apply_holm(raw)
    return dict(zip(others, [_family_too_few(c, len(others)) for c in adjusted]))


def _family_too_few(c: stats.Comparison, family: int) -> stats.Comparison:
    """Holm multiplies the smallest p by the family size, so when even the smallest p these
    repeat counts allow cannot pass, "no detectable change" would be a false comfort."""
    if c.verdict == stats.NO_CHANGE and stats.min_achievable_p(max(c.n_a, 1), max(c.n_b, 1)) * family >= c.alpha:
        return dataclasses.replace(c, verdict=stats.TOO_FEW)
    return c


def noise_floor(repeats: pd.DataFrame, baseline_id: str, cfg: AnalysisConfig, metric: str,
                seed: int = 0) -> Optional[stats.Comparison]:
    """The baseline against itself: its repeats in run order, split into two interleaved halves."""
    base = repeats[repeats["cell_id"] == baseline_id]
    order = ["started_at", "repeat"] if base["started_at"].notna().all() else ["repeat"]
    values = base.sort_values(order)[metric].to_numpy(dtype=float)
    if values.size < 2:
        return None
    return stats.compare_cells(values[0::2], values[1::2], cfg.alpha, cfg.min_effect, seed=seed)


def verdict_table(cells: pd.DataFrame, comparisons: Dict[str, Dict[str, stats.Comparison]],
                  baseline_id: Optional[str], metric: str) -> pd.DataFrame:
    """One row per cell: its figures, then ratio [CI], p, adjusted p, Cliff's delta and verdict
    per metric (`p50_*`, `p95_*`); `verdict` is the chosen metric's. Baseline first, then
    fastest first by the chosen metric, cells with no finished repeat last."""
    rows = []
    for cell in cells.to_dict("records"):
        row = {k: cell.get(k) for k in ("cell", "cell_id", "repeats", "failed", "p50", "p95", "items_per_s")}
        for m in METRICS:
            row.update(_comparison_columns(m, comparisons.get(m, {}).get(cell["cell_id"]),
                                           cell["cell_id"] == baseline_id, cell["repeats"]))
        row["verdict"] = row[f"{metric}_verdict"]
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    rank = table["cell_id"].map(lambda c: 0 if c == baseline_id else 1) + (table["repeats"] == 0) * 2
    return (table.assign(_rank=rank, _ratio=table[f"{metric}_ratio"].fillna(np.inf))
            .sort_values(["_rank", "_ratio", "cell"], kind="stable").drop(columns=["_rank", "_ratio"])
            .reset_index(drop=True))


def _comparison_columns(metric: str, c: Optional[stats.Comparison], is_baseline: bool,
                        repeats: int) -> Dict[str, Any]:
    names = ("ratio", "low", "high", "p", "p_adj", "delta", "verdict")
    if is_baseline:
        values = (1.0, math.nan, math.nan, math.nan, math.nan, math.nan, BASELINE)
    elif c is None or repeats == 0:
        values = (math.nan,) * 6 + (FAILED if repeats == 0 else "",)
    else:   # delta > 0: the cell's values tend to be larger (slower) than the baseline's
        values = (c.ratio, c.ratio_low, c.ratio_high, c.p_value, c.p_adjusted, -c.cliffs_delta, c.verdict)
    return {f"{metric}_{n}": v for n, v in zip(names, values)}


# --------------------------------------------------------------------------- all of it


def analyze(summary: pd.DataFrame, steps: pd.DataFrame, cfg: Optional[AnalysisConfig] = None,
            n_resamples: int = 2000, seed: int = 0) -> Analysis:
    """Cell statistics, verdicts against the baseline and the noise floor of one run."""
    cfg = cfg or AnalysisConfig()
    summary = normalise(summary)
    axes = swept_axes(summary)
    repeats = repeat_table(summary, steps)
    cells = cell_table(summary, steps, n_resamples, seed)
    baseline_id, notes = pick_baseline(cells, cfg.baseline, axes) if not cells.empty else (None, [])
    if baseline_id is not None:
        cells["is_baseline"] = cells["cell_id"] == baseline_id
    comparisons = {m: compare_with_baseline(repeats, list(cells["cell_id"]), baseline_id, cfg, m, seed)
                   for m in METRICS} if baseline_id is not None else {}
    floor = noise_floor(repeats, baseline_id, cfg, cfg.metric, seed) if baseline_id is not None else None
    verdicts = verdict_table(cells, comparisons, baseline_id, cfg.metric) if not cells.empty else pd.DataFrame()
    notes += _notes(cells, verdicts, floor, cfg, comparisons.get(cfg.metric, {}))
    return Analysis(cfg.metric, baseline_id, axes, repeats, cells, verdicts, floor, notes)


def _notes(cells: pd.DataFrame, verdicts: pd.DataFrame, floor: Optional[stats.Comparison],
           cfg: AnalysisConfig, comparisons: Dict[str, stats.Comparison]) -> List[str]:
    notes = []
    if not cells.empty and (cells["repeats"] <= 1).all():
        notes.append("one repeat per cell: no verdicts are possible; run with repeats=5 or more "
                     "(each repeat is a fresh process, the unit of evidence)")
    elif any(c.verdict == stats.TOO_FEW for c in comparisons.values()):
        notes.append(f"too few repeats: with {len(comparisons)} comparisons and Holm's correction, no p-value "
                     f"these repeat counts allow can reach alpha={cfg.alpha}; raise repeats")
    if floor is not None and floor.verdict in (stats.FASTER, stats.SLOWER):
        notes.append("the baseline differs from itself (A/A): the machine drifted during the sweep; "
                     "treat the verdicts with suspicion")
    if "ci_over" in cells and (cells["ci_over"] == "none").any():
        notes.append("some cells have no steps.parquet: their figures come from the summary, without intervals")
    return notes
