"""Cells: the repeats of one grid point, their figures, and verdicts against the baseline.

A cell is one grid point (`cell_id`); each of its repeats is one trial process.
The repeat is the unit of evidence (see stats.py): a cell is compared with the
baseline over one value per repeat, Holm-adjusted across cells, and judged faster /
slower / within the minimum effect / no detectable change / too few repeats. The
noise floor is the baseline against itself: its repeats split into two interleaved halves.

What is judged (`analysis.metric`): throughput by default, a repeat's items / its time
over its measured steps (larger is faster); or the repeat's p50 or p95 step time
(latency figures, smaller is faster). A cell's figure is the median over its finished
repeats of each repeat's value, so a cell's figure / the baseline's is the verdict's ratio.

Pure over DataFrames (the summary and the steps of `sweeper.results.load`); only
`load_run` reads files. Imports no Ray, torch or W&B.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from sweeper.analysis import overlap, stats
from sweeper.analysis.fleet import fleet_table
from sweeper.analysis.text import cell_label, same_value, short_keys
from sweeper.schema import AnalysisConfig
from sweeper.measure.rules import counted_seconds

BASELINE = "baseline"
FAILED = "failed"
ALONE = "alone in its stratum"     # the only cell of its stratum: nothing to compare it with
STRATUM = "stratum"                # the cells' column: "kind=images", the values of the strata keys
METRICS = ("throughput", "p50", "p95")
# the repeat-table column each metric compares, and which way is faster
COLUMN = {"throughput": "items_per_s", "p50": "p50", "p95": "p95"}
HIGHER_IS_BETTER = {"throughput", "items_per_s"}
# Pooled-step statistics of a cell, with a bootstrap interval (they describe its spread).
CELL_STATISTICS = ("p50", "p95", "mean", "std", "cv")
FIRST_BATCH = ("time_to_first_batch_s", "first batch s", 1.0, 3)
# per metric in the verdict table: {metric}_{name}; the ratio is cell / baseline, its 95% interval ratio_low/high
VERDICT_COLUMNS = ("ratio", "ratio_low", "ratio_high", "p", "p_adj", "delta", "verdict")

Column = Tuple[str, str, float, int]      # figure key, column label, scale, digits


@dataclass
class RunData:
    """One run folder: the summary (one row per trial), its measured steps, the records."""
    path: Path
    summary: pd.DataFrame
    steps: pd.DataFrame
    records: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class WorkloadView:
    """What the views need of the workload's spec (the record's `workload_spec`)."""
    name: str = ""
    items_label: str = "items"
    headline: List[Column] = field(default_factory=list)
    memory: str = "host_mem_gb"           # the cells' memory column that is this workload's own


@dataclass
class Analysis:
    config: AnalysisConfig
    baseline_id: Optional[str]
    axes: List[str]
    names: Dict[str, str]        # axis -> its column header (shortest unique dotted tail)
    workload: WorkloadView
    repeats: pd.DataFrame        # one row per finished trial: its items/s, p50, p95, headline figures
    cells: pd.DataFrame          # one row per cell: figures with intervals, status, memory
    verdicts: pd.DataFrame       # one row per cell, best first: against the baseline, per metric
    noise_floor: Optional[stats.Comparison]
    notes: List[str]
    recommendation: Any = None   # recommend.Recommendation, or None
    pitfalls: pd.DataFrame = field(default_factory=pd.DataFrame)   # trial_id, cell_id, cell, code, message
    extra: List[Column] = field(default_factory=list)   # figures the analysis adds per cell: cost, scaling
    cost_column: Optional[str] = None                   # usd_per_m_tokens / usd_per_m_samples, when priced
    fleet: pd.DataFrame = field(default_factory=pd.DataFrame)   # each device against its peers (analysis/fleet.py)
    # Strata (analysis.compare_within, and `workload` in a run over several): cells are compared only
    # within theirs. Empty: one stratum, the whole run (baseline_id, noise_floor, recommendation).
    strata: List[str] = field(default_factory=list)              # the keys (columns) that split the run
    baselines: Dict[str, str] = field(default_factory=dict)      # stratum label -> its baseline cell_id
    noise_floors: Dict[str, Optional[stats.Comparison]] = field(default_factory=dict)   # per stratum
    recommendations: Dict[str, Any] = field(default_factory=dict)   # per stratum; a lone cell's: None

    @property
    def metric(self) -> str:
        return self.config.metric

    def is_baseline(self, cell_id: Any) -> bool:
        """Whether the cell is the baseline (of its stratum, when the run has strata)."""
        return cell_id in self.baselines.values() if self.strata else cell_id == self.baseline_id

    def stratum_labels(self) -> List[str]:
        """The strata in the order their first cells appear ([""] when the run has none)."""
        if not self.strata or self.cells.empty:
            return [""]
        return list(dict.fromkeys(self.cells[STRATUM]))


# --------------------------------------------------------------------------- loading


def _as_dict(record: Any) -> Dict[str, Any]:
    return record.to_dict() if hasattr(record, "to_dict") else record


def load_run(path, records: Optional[Sequence[Any]] = None) -> RunData:
    """A run folder as frames; trial-level figures and start times join the summary.
    `records`: the run's trial records when the caller holds them (else read from disk)."""
    from sweeper.results import load, read_records

    records = [_as_dict(r) for r in records] if records is not None else read_records(Path(path))
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
    """The sweep's axes: the summary's dotted columns (data.num_workers, ...), in order;
    first the workload when the run holds several (+sweep=playbook)."""
    axes = [c for c in summary.columns if "." in str(c)]
    return ["workload", *axes] if len(run_workloads(summary)) > 1 else axes


def run_workloads(summary: pd.DataFrame) -> List[str]:
    """The workloads a run's trials ran, in order of first appearance."""
    return list(dict.fromkeys(summary["workload"].dropna().astype(str))) if "workload" in summary.columns else []


def workload_view(records: Sequence[Dict[str, Any]], summary: pd.DataFrame) -> WorkloadView:
    """The records' workload spec; for records older than specs: items, the first-batch time
    when the trials recorded one, and memory decided later from what the cells hold."""
    specs = list({r["workload_spec"].get("name"): r["workload_spec"] for r in records if r.get("workload_spec")}.values())
    if len(specs) > 1:
        return _several_workloads(specs)
    spec = specs[0] if specs else {}
    headline = [(str(k), str(label), float(scale), int(digits)) for k, label, scale, digits in spec.get("headline", [])]
    if not spec and FIRST_BATCH[0] in summary.columns and summary[FIRST_BATCH[0]].notna().any():
        headline = [FIRST_BATCH]
    return WorkloadView(spec.get("name", ""), spec.get("items_label") or "items", headline, spec.get("memory", ""))


def _several_workloads(specs: Sequence[Dict[str, Any]]) -> WorkloadView:
    """A run over several workloads: items of different kinds, and the first headline figure
    of each workload (a cell of another workload shows "-" there)."""
    headline = [tuple(s["headline"][0]) for s in specs if s.get("headline")]
    headline = [(str(k), str(label), float(scale), int(digits)) for k, label, scale, digits in headline]
    return WorkloadView(",".join(str(s.get("name", "")) for s in specs), "items", headline, "")


def axis_column(key: str, columns: Sequence[str], axes: Sequence[str]) -> Optional[str]:
    """The column a dotted key (or its tail, "num_workers") names, or None."""
    return key if key in columns else next((a for a in axes if a.endswith("." + key)), None)


def _matches(row: pd.Series, wanted: Dict[str, str], axes: Sequence[str]) -> bool:
    for key, value in wanted.items():      # typed: a swept 1.0 matches "1.0" and "1"
        column = axis_column(key, row.index, axes)
        if column is None or not same_value(row[column], value):
            return False
    return True


def baseline_wanted(spec: Optional[str]) -> Dict[str, str]:
    """analysis.baseline "key=value key=value" as {key: value}."""
    return dict(token.split("=", 1) for token in (spec or "").split())


def pick_baseline(cells: pd.DataFrame, spec: Optional[str], axes: Sequence[str],
                  where: str = "this run") -> tuple[Optional[str], List[str]]:
    """(baseline cell_id, notes): the cell `spec` names, else the one the plan marked, else the first."""
    if cells.empty:
        return None, []
    if spec:
        wanted = baseline_wanted(spec)
        found = [row["cell_id"] for _, row in cells.iterrows() if _matches(row, wanted, axes)]
        if found:
            return found[0], []
        return None, [f"analysis.baseline={spec!r} matches no cell of {where}; no verdicts"]
    marked = cells.loc[cells["is_baseline"], "cell_id"]
    if len(marked):
        return str(marked.iloc[0]), []
    return str(cells["cell_id"].iloc[0]), ["no cell is marked as the baseline: the first cell is used"]


# --------------------------------------------------------------------------- strata


def strata_keys(summary: pd.DataFrame, axes: Sequence[str], cfg: AnalysisConfig) -> tuple[List[str], List[str]]:
    """(the columns that split the run into strata, notes): `workload` when the run holds
    several (a copy's items/s and a forward pass's measure different things), then each key
    of analysis.compare_within that is a swept axis of this run."""
    keys = ["workload"] if len(run_workloads(summary)) > 1 else []
    notes = []
    for key in cfg.compare_within or []:
        column = axis_column(key, [a for a in axes if a != "workload"], axes) if key != "workload" else None
        if key == "workload" or column in keys:
            continue
        if column is None or summary[column].astype(str).nunique() < 2:    # one value: one stratum, no split
            notes.append(f"analysis.compare_within: {key} has one value in this run, so it splits nothing")
        else:
            keys.append(column)
    return keys, notes


def stratum_labels(cells: pd.DataFrame, keys: Sequence[str], names: Dict[str, str]) -> List[str]:
    """Each cell's stratum as "kind=images" (the strata keys' values under their short names)."""
    return [cell_label({k: row[k] for k in keys}, names) for row in cells.to_dict("records")]


def pick_stratum_baseline(cells: pd.DataFrame, spec: Optional[str], axes: Sequence[str], keys: Sequence[str],
                          label: str) -> tuple[Optional[str], List[str]]:
    """A stratum's baseline: the configured baseline's other settings with the stratum's own
    values of the strata keys (a key of the spec that is a strata key is left out), else the
    cell the plan marked, else the first. A cell alone in its stratum has none."""
    if len(cells) < 2:
        return None, []
    wanted = {k: v for k, v in baseline_wanted(spec).items() if axis_column(k, list(keys), list(keys)) is None}
    text = " ".join(f"{k}={v}" for k, v in wanted.items()) or None
    return pick_baseline(cells, text, axes, where=f"stratum {label}")


def _judge_strata(cells: pd.DataFrame, repeats: pd.DataFrame, cfg: AnalysisConfig, axes: Sequence[str],
                  keys: Sequence[str], seed: int):
    """Per stratum: its baseline, its comparisons (Holm within the stratum) and its noise floor.
    Returns (baselines, comparisons per metric over all cells, noise floors, notes)."""
    baselines: Dict[str, str] = {}
    comparisons: Dict[str, Dict[str, stats.Comparison]] = {m: {} for m in METRICS}
    floors: Dict[str, Optional[stats.Comparison]] = {}
    notes: List[str] = []
    for label, mine in cells.groupby(STRATUM, sort=False):
        base, why = pick_stratum_baseline(mine, cfg.baseline, axes, keys, label)
        notes += why
        if base is None:
            continue
        baselines[label] = base
        for m in METRICS:
            comparisons[m].update(compare_with_baseline(repeats, list(mine["cell_id"]), base, cfg, m, seed))
        floors[label] = noise_floor(repeats, base, cfg, cfg.metric, seed)
    return baselines, comparisons, floors, notes


def _strata_note(cells: pd.DataFrame, keys: Sequence[str], names: Dict[str, str], workloads: Sequence[str]) -> str:
    count = cells[STRATUM].nunique()
    lone = int((cells.groupby(STRATUM)["cell_id"].count() == 1).sum())
    why = (f"this run holds {len(workloads)} workloads ({', '.join(workloads)}), which measure different "
           f"things: each is compared only with cells of its own workload; " if "workload" in keys else "")
    alone = f"; {lone} cell(s) alone in their stratum get no verdict ({ALONE!r})" if lone else ""
    return (f"{why}compared within {', '.join(names.get(k, k) for k in keys)}: {count} strata, each with its own "
            f"baseline, verdicts (Holm within the stratum), noise floor and recommendation{alone}")


# --------------------------------------------------------------------------- per repeat


def measured_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps the figures are over: warm-up steps left out."""
    if steps.empty or "step_s" not in steps.columns:
        return pd.DataFrame(columns=["trial_id", "step_s"])
    return steps[~steps["warmup"].astype(bool)] if "warmup" in steps.columns else steps


def repeat_table(summary: pd.DataFrame, steps: pd.DataFrame, figures: Sequence[str] = ()) -> pd.DataFrame:
    """One row per finished trial: cell, repeat, p50, p95, mean step time, items/s, and the
    workload's `figures` (headline keys). Items/s of a repeat is its items / its time over its
    measured steps. From the trial's measured steps when they are there, else its summary row.
    """
    summary = normalise(summary)
    ok = summary[summary["status"] == "ok"]
    by_trial = {k: g for k, g in measured_steps(steps).groupby("trial_id")} if not steps.empty else {}
    rows = []
    for row in ok.to_dict("records"):
        rows.append({"trial_id": row["trial_id"], "cell_id": row["cell_id"], "repeat": row["repeat"],
                     "is_baseline": row["is_baseline"], "started_at": row.get("started_at"),
                     **_repeat_figures(row, by_trial.get(row["trial_id"])),
                     **{k: _float(row.get(k)) for k in figures},
                     **{k: math.nan for k in overlap.COLUMNS}, **overlap.trial_overlap(row)})
    columns = ["trial_id", "cell_id", "repeat", "is_baseline", "started_at", "p50", "p95", "mean",
               "items_per_s", "steps", *(k for k in figures if k not in ("p50", "p95", "mean", "items_per_s")),
               *overlap.COLUMNS]
    return pd.DataFrame(rows, columns=list(dict.fromkeys(columns)))


def _counted(steps: pd.DataFrame) -> np.ndarray:
    """The seconds a trial's items/s counts: its steps' cycles (docs/measurement.md)."""
    return counted_seconds(steps["step_s"].to_numpy(float),
                           steps["cycle_s"].to_numpy(float) if "cycle_s" in steps.columns else None)


def _repeat_figures(row: Dict[str, Any], steps: Optional[pd.DataFrame]) -> Dict[str, float]:
    if steps is None or steps.empty:
        return {"p50": _float(row.get("step_p50_s")), "p95": _float(row.get("step_p95_s")),
                "mean": _float(row.get("step_mean_s")), "items_per_s": _float(row.get("items_per_s")),
                "steps": _float(row.get("steps"))}
    seconds = steps["step_s"].to_numpy(dtype=float)
    counted = _counted(steps)
    items = steps["items"].to_numpy(dtype=float) if "items" in steps.columns else np.full(seconds.size, np.nan)
    rate = float(np.sum(items) / np.sum(counted)) if not np.isnan(items).any() and counted.sum() > 0 else math.nan
    return {"p50": stats.percentile(seconds, 50), "p95": stats.percentile(seconds, 95),
            "mean": float(np.mean(seconds)), "items_per_s": rate, "steps": float(seconds.size)}


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _median(values) -> float:
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.median(x)) if x.size else math.nan


# --------------------------------------------------------------------------- per cell


def cell_table(summary: pd.DataFrame, steps: pd.DataFrame, n_resamples: int = 2000, seed: int = 0,
               repeats: Optional[pd.DataFrame] = None, figures: Sequence[str] = ()) -> pd.DataFrame:
    """One row per cell: swept values, repeats, status, and its figures with intervals.

    items_per_s, p50, p95 (and the workload's headline `figures`): the median over the
    cell's finished repeats of each repeat's value. mean, std, cv: over its pooled
    measured steps. Intervals come from a two-level bootstrap (repeats, then steps) with
    2 or more repeats (`ci_over` = "repeats"); with one repeat they cover that process's
    step noise only (`ci_over` = "steps") and are too narrow to compare cells with.
    """
    summary = normalise(summary)
    repeats = repeat_table(summary, steps, figures) if repeats is None else repeats
    axes = swept_axes(summary)
    names = short_keys(axes)
    measured = measured_steps(steps)
    by_trial = dict(tuple(measured.groupby("trial_id"))) if not measured.empty else {}   # once, not per cell
    rows = []
    for cell_id, trials in summary.groupby("cell_id", sort=False):
        ok = trials[trials["status"] == "ok"]
        groups = [by_trial[t] for t in sorted(set(ok["trial_id"])) if t in by_trial]
        values = {a: trials[a].iloc[0] for a in axes}
        row = {"cell_id": cell_id, "cell": cell_label(values, names) or cell_id, **values,
               "is_baseline": bool(trials["is_baseline"].any()), "repeats": len(ok),
               "failed": int(len(trials) - len(ok)), "status": _status(trials)}
        row.update(_cell_statistics(groups, repeats[repeats["cell_id"] == cell_id], figures, n_resamples, seed))
        row.update(_resource_columns(trials, by_trial))
        rows.append(row)
    return pd.DataFrame(rows)


def _status(trials: pd.DataFrame) -> str:
    """"ok", the one status all its trials ended with, else "3/5 ok"."""
    statuses = list(trials["status"])
    if len(set(statuses)) == 1:
        return str(statuses[0])
    return f"{statuses.count('ok')}/{len(statuses)} ok"


def _cell_statistics(groups: List[pd.DataFrame], repeats: pd.DataFrame, figures: Sequence[str],
                     n_resamples: int, seed: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {"steps": int(sum(len(g) for g in groups))}
    out.update({name: _median(repeats[name]) for name in ("items_per_s", "p50", "p95", *figures)})
    # the adaptive-repeats figure (plan.wants_another_repeat computes the same): 95% interval half-width / mean
    out["items_per_s_rel_halfwidth"] = stats.mean_rel_halfwidth(repeats["items_per_s"])
    out.update({name: _median(repeats[name]) for name in overlap.COLUMNS})
    if not groups:   # no steps on disk: the summary's figures, without intervals
        out["mean"] = _median(repeats["mean"])
        out["ci_over"] = "none"
        return out
    seconds = [g["step_s"].to_numpy(float) for g in groups]
    counted = [_counted(g) for g in groups]
    items = [g["items"].to_numpy(float) if "items" in g else np.full(len(g), np.nan) for g in groups]
    if len(groups) >= 2:
        cis = stats.cell_cis(seconds, items, n_resamples=n_resamples, seed=seed, repeat_counted=counted)
    else:
        cis = _one_repeat_cis(seconds[0], items[0], counted[0], n_resamples, seed)
    for name, (point, low, high) in cis.items():
        if name in stats.POOLED_FIGURES:
            out[name] = point
        out.update({f"{name}_low": low, f"{name}_high": high})
    out["ci_over"] = "repeats" if len(groups) >= 2 else "steps"
    return out


def _one_repeat_cis(seconds: np.ndarray, items: np.ndarray, counted: np.ndarray, n_resamples: int,
                    seed: int) -> Dict[str, tuple]:
    """One process: intervals over its steps only (too narrow to compare cells with)."""
    out = {}
    for name in CELL_STATISTICS:
        point = _point(seconds, name)
        out[name] = (point, *stats.bootstrap_ci(seconds, name, n_resamples=n_resamples, seed=seed))
    out["items_per_s"] = stats.throughput_ci(counted, items, n_resamples=n_resamples, seed=seed)
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
MEMORY_COLUMNS = ("gpu_mem_gb", "host_mem_gb")


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
    for name in MEMORY_COLUMNS:
        values = [m[name] for m in memory if not math.isnan(m[name])]
        if values:
            out[name] = float(max(values))
    if "num_cpus" in trials.columns and trials["num_cpus"].notna().any():
        out["num_cpus"] = float(pd.to_numeric(trials["num_cpus"], errors="coerce").max())
    return out


def _memory_column(view: WorkloadView, cells: pd.DataFrame) -> str:
    """The spec's memory column, else GPU memory when any cell recorded it, else host memory."""
    if view.memory in MEMORY_COLUMNS:
        return view.memory
    has_gpu = "gpu_mem_gb" in cells.columns and cells["gpu_mem_gb"].notna().any()
    return "gpu_mem_gb" if has_gpu else "host_mem_gb"


# --------------------------------------------------------------------------- verdicts


def _values(repeats: pd.DataFrame, cell_id: str, column: str) -> np.ndarray:
    return repeats.loc[repeats["cell_id"] == cell_id, column].to_numpy(dtype=float)


def compare_with_baseline(repeats: pd.DataFrame, cells: Sequence[str], baseline_id: str,
                          cfg: AnalysisConfig, metric: str, seed: int = 0) -> Dict[str, stats.Comparison]:
    """Each cell against the baseline over per-repeat values of `metric` (a metric name or a
    repeat-table column), Holm across cells."""
    column, higher = COLUMN.get(metric, metric), metric in HIGHER_IS_BETTER
    base = _values(repeats, baseline_id, column)
    others = [c for c in cells if c != baseline_id]
    raw = [stats.compare_cells(base, _values(repeats, c, column), cfg.alpha, cfg.min_effect, seed=seed,
                               higher_is_better=higher) for c in others]
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
    values = base.sort_values(order)[COLUMN[metric]].to_numpy(dtype=float)
    if values.size < 2:
        return None
    return stats.compare_cells(values[0::2], values[1::2], cfg.alpha, cfg.min_effect, seed=seed,
                               higher_is_better=metric in HIGHER_IS_BETTER)


def verdict_table(cells: pd.DataFrame, comparisons: Dict[str, Dict[str, stats.Comparison]],
                  baseline_id: Optional[str], metric: str, baselines: Sequence[str] = ()) -> pd.DataFrame:
    """One row per cell: its figures, then ratio [CI], p, adjusted p, Cliff's delta and verdict
    per metric (`throughput_ratio`, `p50_ratio_low`, ...: VERDICT_COLUMNS); `verdict` is the chosen metric's. Baseline
    first, then best first by the chosen metric, cells with no finished repeat last. With strata
    (a `stratum` column in `cells`, `baselines` one per stratum): stratum by stratum, in order of
    appearance, each ordered so; a cell alone in its stratum reads ALONE."""
    stratified = STRATUM in cells.columns
    bases = set(baselines) if stratified else {baseline_id}
    alone = set(cells.groupby(STRATUM)["cell_id"].filter(lambda c: len(c) == 1)) if stratified else set()
    rows = []
    for cell in cells.to_dict("records"):
        row = {k: cell.get(k) for k in ("cell", "cell_id", *((STRATUM,) if stratified else ()), "repeats", "failed",
                                        "items_per_s", "p50", "p95")}
        for m in METRICS:
            row.update(_comparison_columns(m, comparisons.get(m, {}).get(cell["cell_id"]),
                                           cell["cell_id"] in bases, cell["repeats"], cell["cell_id"] in alone))
        row["verdict"] = row[f"{metric}_verdict"]
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    rank = table["cell_id"].map(lambda c: 0 if c in bases else 1) + (table["repeats"] == 0) * 2
    if stratified:
        order = {label: i for i, label in enumerate(dict.fromkeys(cells[STRATUM]))}
        rank = rank + table[STRATUM].map(order) * 10
    worse_first = table[f"{metric}_ratio"] * (-1 if metric in HIGHER_IS_BETTER else 1)
    return (table.assign(_rank=rank, _key=worse_first.fillna(np.inf))
            .sort_values(["_rank", "_key", "cell"], kind="stable").drop(columns=["_rank", "_key"])
            .reset_index(drop=True))


def _comparison_columns(metric: str, c: Optional[stats.Comparison], is_baseline: bool,
                        repeats: int, alone: bool = False) -> Dict[str, Any]:
    names = VERDICT_COLUMNS
    if alone:
        values = (math.nan,) * 6 + (ALONE,)
    elif is_baseline:
        values = (1.0, math.nan, math.nan, math.nan, math.nan, math.nan, BASELINE)
    elif c is None or repeats == 0:
        values = (math.nan,) * 6 + (FAILED if repeats == 0 else "",)
    else:   # delta > 0: the cell tends to be faster than the baseline, whichever the metric
        delta = -c.cliffs_delta if c.higher_is_better else c.cliffs_delta
        values = (c.ratio, c.ratio_low, c.ratio_high, c.p_value, c.p_adjusted, delta, c.verdict)
    return {f"{metric}_{n}": v for n, v in zip(names, values)}


# --------------------------------------------------------------------------- all of it


def analyze(summary: pd.DataFrame, steps: pd.DataFrame, cfg: Optional[AnalysisConfig] = None,
            n_resamples: int = 2000, seed: int = 0, records: Sequence[Dict[str, Any]] = (),
            cost: Any = None) -> Analysis:
    """Cell figures, verdicts against the baseline, the noise floor, pitfalls, cost, scaling
    and the recommendation of one run. `cost`: the run's CostConfig (None: no cost columns)."""
    from sweeper.analysis.recommend import recommend

    cfg = cfg or AnalysisConfig()
    summary = normalise(summary)
    axes = swept_axes(summary)
    view = workload_view(records, summary)
    figures = [h[0] for h in view.headline]
    repeats = repeat_table(summary, steps, figures)
    cells = cell_table(summary, steps, n_resamples, seed, repeats, figures)
    view.memory = _memory_column(view, cells)
    unrecorded = [h for h in view.headline if cells.empty or cells[h[0]].isna().all()]
    view.headline = [h for h in view.headline if h not in unrecorded]    # a column of "-" says nothing
    cells = cells.drop(columns=[h[0] for h in unrecorded if h[0] in cells])
    names = short_keys(axes)
    keys, notes = strata_keys(summary, axes, cfg) if not cells.empty else ([], [])
    baselines: Dict[str, str] = {}
    floors: Dict[str, Optional[stats.Comparison]] = {}
    if keys:                    # each stratum judged on its own (analysis.compare_within, several workloads)
        cells.insert(2, STRATUM, stratum_labels(cells, keys, names))
        baselines, comparisons, floors, why = _judge_strata(cells, repeats, cfg, axes, keys, seed)
        baseline_id, floor = None, None
        notes += [_strata_note(cells, keys, names, run_workloads(summary))] + why
        cells["is_baseline"] = cells["cell_id"].isin(set(baselines.values()))
    else:
        baseline_id, why = pick_baseline(cells, cfg.baseline, axes) if not cells.empty else (None, [])
        notes += why
        if baseline_id is not None:
            cells["is_baseline"] = cells["cell_id"] == baseline_id
        comparisons = {m: compare_with_baseline(repeats, list(cells["cell_id"]), baseline_id, cfg, m, seed)
                       for m in METRICS} if baseline_id is not None else {}
        floor = noise_floor(repeats, baseline_id, cfg, cfg.metric, seed) if baseline_id is not None else None
    verdicts = (verdict_table(cells, comparisons, baseline_id, cfg.metric, list(baselines.values()))
                if not cells.empty else pd.DataFrame())
    notes += _notes(cells, repeats, [floor] if not keys else list(floors.values()), cfg,
                    comparisons.get(cfg.metric, {}), _family_size(cells, baselines) if keys else None,
                    judged=bool(baselines) or not keys)
    fleet = fleet_table(records, repeats, cfg, seed)
    notes += _fleet_notes(fleet)
    analysis = Analysis(cfg, baseline_id, axes, names, view, repeats, cells, verdicts, floor, notes,
                        fleet=fleet, strata=keys, baselines=baselines, noise_floors=floors)
    _add_findings(analysis, records, cost)
    if keys:
        from sweeper.analysis.recommend import recommend_each

        analysis.recommendations = recommend_each(analysis, cfg)
    else:
        analysis.recommendation = recommend(analysis, cfg)
    return analysis


def _family_size(cells: pd.DataFrame, baselines: Dict[str, str]) -> int:
    """The largest Holm family of a stratified run: the cells of a stratum but its baseline."""
    sizes = cells.groupby(STRATUM)["cell_id"].count() - 1
    return int(max([sizes[label] for label in baselines] or [0]))


def _add_findings(analysis: Analysis, records: Sequence[Dict[str, Any]], cost: Any) -> None:
    """Pitfalls per trial (and their codes per cell), cost and scaling columns per cell."""
    from sweeper.analysis import cost as costs
    from sweeper.analysis.pitfalls import trial_pitfalls

    cells = analysis.cells
    if cells.empty:
        return
    labels = dict(zip(cells["cell_id"], cells["cell"]))
    rows = [{"trial_id": r["trial_id"], "cell_id": r.get("cell_id"), "cell": labels.get(r.get("cell_id"), ""),
             "code": p.code, "message": p.message} for r in records for p in trial_pitfalls(r)]
    analysis.pitfalls = pd.DataFrame(rows, columns=["trial_id", "cell_id", "cell", "code", "message"])
    by_cell = analysis.pitfalls.groupby("cell_id")["code"].agg(lambda c: ";".join(sorted(set(c)))).to_dict()
    cells["pitfalls"] = [by_cell.get(c, "") for c in cells["cell_id"]]
    cells, notes, column = costs.cost_columns(cells, records, cost, analysis.workload.items_label)
    cells = costs.scaling_columns(cells, analysis.axes)
    analysis.notes += notes
    if column is not None:
        unit = column.rsplit("_", 1)[-1]
        analysis.cost_column = column
        analysis.extra.append((column, f"$/M {unit}", 1.0, 4))
    if "scaling_efficiency" in cells.columns:
        analysis.extra.append(("scaling_efficiency", "scaling eff.", 1.0, 3))
    analysis.cells = cells


def _fleet_notes(fleet: pd.DataFrame) -> List[str]:
    slow = fleet[fleet["outlier"]] if not fleet.empty else fleet
    return [f"fleet: {row['device']} (node {str(row['node'])[:12]}) is slower than its peers on cell "
            f"{row['cell_id']}: {row['ratio']:.3f}x their items/s, p {row['p_adj']:.3g} after Holm"
            for row in slow.to_dict("records")]


def _notes(cells: pd.DataFrame, repeats: pd.DataFrame, floors: Sequence[Optional[stats.Comparison]],
           cfg: AnalysisConfig, comparisons: Dict[str, stats.Comparison], family: Optional[int] = None,
           judged: bool = True) -> List[str]:
    """`judged`: some cell has a baseline to be compared with (a run of lone strata has none)."""
    notes = []
    family = len(comparisons) if family is None else family
    if judged and not cells.empty and (cells["repeats"] <= 1).all():
        notes.append("one repeat per cell: no verdicts are possible; run with repeats=5 or more "
                     "(each repeat is a fresh process, the unit of evidence)")
    elif any(c.verdict == stats.TOO_FEW for c in comparisons.values()):
        notes.append(f"too few repeats: with {family} comparisons and Holm's correction, no p-value "
                     f"these repeat counts allow can reach alpha={cfg.alpha}; raise repeats")
    if any(f is not None and f.verdict in (stats.FASTER, stats.SLOWER) for f in floors):
        notes.append("the baseline differs from itself (A/A): the machine drifted during the sweep; "
                     "treat the verdicts with suspicion")
    if cfg.metric == "throughput" and not repeats.empty and repeats["items_per_s"].isna().all():
        notes.append("the trials recorded no items per step, so throughput cannot be judged; "
                     "use analysis.metric=p50")
    if "ci_over" in cells and (cells["ci_over"] == "none").any():
        notes.append("some cells have no steps.parquet: their figures come from the summary, without intervals")
    return notes
