"""The one analysis of a run, which every view reads: the orchestration of the pure steps.

    from sweeper.analysis.run import analyze_run, run_analysis_config
    data, analysis = analyze_run(run, run_analysis_config(run))

The driver calls `analyze_run` once when a sweep ends, with the records it holds; the
terminal tables, report.md/html, the W&B summary run, cells.parquet and the Prometheus
exporter are views of what it returns. Nothing is cached: call it once and pass it on.

`analyze`: records -> repeats (repeats.py) -> cells (cells.py) -> strata and their baselines
(baselines.py) -> verdicts and noise floors (verdicts.py) -> findings (findings.py) -> each
stratum's recommendation (recommend.py) -> one immutable Analysis (model.py).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from sweeper.analysis import baselines, findings, verdicts
from sweeper.analysis.cells import cell_table, memory_column
from sweeper.analysis.fleet import fleet_table
from sweeper.analysis.load import load_run, normalise, run_workloads, swept_axes, workload_view
from sweeper.analysis.model import LEFT_OUT, METRICS, STOPPED, VERDICT_COLUMNS, Analysis, RunData, Stratum, WorkloadView
from sweeper.analysis.pairs import pair_ratios
from sweeper.analysis.recommend import recommend
from sweeper.analysis.repeats import repeat_table
from sweeper.analysis.text import short_keys
from sweeper.schema import AUTO, AnalysisConfig, ConstraintsConfig, CostConfig, SequentialConfig


def analyze_run(run: Path, cfg: AnalysisConfig, records: Optional[Sequence[Any]] = None,
                n_resamples: int = 2000, cost: Optional[CostConfig] = None) -> Tuple[RunData, Analysis]:
    """(RunData, Analysis) of a run folder. `records`: the trial records the caller holds
    (dicts or TrialRecords); None reads them from the folder. `cost`: the prices; None reads
    them from the run's multirun.yaml, as it reads whether the run was repeats=auto."""
    data = load_run(Path(run), records)
    cost = run_cost_config(Path(run)) if cost is None else cost
    return data, analyze(data.summary, data.steps, cfg, n_resamples=n_resamples, records=data.records, cost=cost,
                         sequential=run_sequential_config(Path(run)))


def analyze(summary: pd.DataFrame, steps: pd.DataFrame, cfg: Optional[AnalysisConfig] = None,
            n_resamples: int = 2000, seed: int = 0, records: Sequence[Dict[str, Any]] = (),
            cost: Any = None, sequential: Optional[SequentialConfig] = None) -> Analysis:
    """Cell figures, verdicts against each stratum's baseline, noise floors, pitfalls, cost,
    scaling, the microbenchmarks' own pairs and the recommendations of one run. `cost`: the
    run's CostConfig (None: no cost columns); `sequential`: a repeats=auto run's bounds (None:
    fixed repeats)."""
    cfg = cfg or AnalysisConfig()
    summary = normalise(summary)
    axes = swept_axes(summary)
    names, workloads = short_keys(axes), run_workloads(summary)
    view, repeats, cells = _figures(summary, steps, workload_view(records, summary), n_resamples, seed)
    keys, notes = baselines.split_keys(summary, axes, cfg, len(workloads)) if not cells.empty else ([], [])
    cells, strata, why = baselines.strata_of(cells, keys, names, cfg, axes)
    strata, comparisons, stopped = verdicts.judge(strata, repeats, cfg, seed, sequential, _trial_repeats(summary))
    notes += ([baselines.strata_note(strata, keys, names, workloads)] if keys else []) + why
    table = verdicts.verdict_table(cells, comparisons, strata, cfg.metric, stopped if sequential else None)
    notes += findings.verdict_notes(cells, repeats, strata, cfg, comparisons.get(cfg.metric, {}))
    fleet = fleet_table(records, repeats, cfg, seed)
    found = findings.findings(cells, records, cost, view.items_label, axes)
    labels = dict(zip(found.cells["cell_id"], found.cells["cell"])) if not cells.empty else {}
    draft = Analysis(cfg, tuple(axes), names, view, repeats, found.cells, table, strata,
                     tuple(notes + findings.fleet_notes(fleet)) + found.notes, tuple(keys), found.pitfalls,
                     found.extra, found.cost_column, fleet, tuple(pair_ratios(records, labels)),
                     verdicts.sequential_design(strata, cfg, sequential))
    return dataclasses.replace(draft, strata=tuple(_recommended(draft, s, cfg) for s in strata))


def _figures(summary: pd.DataFrame, steps: pd.DataFrame, view: WorkloadView, n_resamples: int, seed: int):
    """(the workload view, repeats, cells): headline figures no cell recorded are dropped (a
    column of "-" says nothing), and the memory column is the one the cells hold."""
    repeats = repeat_table(summary, steps, [h[0] for h in view.headline])
    cells = cell_table(summary, steps, n_resamples, seed, repeats, [h[0] for h in view.headline])
    unrecorded = [h for h in view.headline if cells.empty or cells[h[0]].isna().all()]
    view = dataclasses.replace(view, memory=memory_column(view.memory, cells),
                               headline=tuple(h for h in view.headline if h not in unrecorded))
    return view, repeats, cells.drop(columns=[h[0] for h in unrecorded if h[0] in cells])


def _recommended(analysis: Analysis, stratum: Stratum, cfg: AnalysisConfig) -> Stratum:
    """The stratum with its recommendation, over its own cells against its own baseline."""
    if stratum.baseline_id is None:
        return stratum
    return dataclasses.replace(stratum, recommendation=recommend(within(analysis, stratum), cfg))


def within(analysis: Analysis, stratum: Stratum) -> Analysis:
    """The analysis of one stratum's cells alone (what its recommendation reads)."""
    ids = set(stratum.cell_ids)
    mine = analysis.cells["cell_id"].isin(ids)
    return dataclasses.replace(analysis, cells=analysis.cells[mine].reset_index(drop=True),
                               verdicts=analysis.verdicts[analysis.verdicts["cell_id"].isin(ids)],
                               repeats=analysis.repeats[analysis.repeats["cell_id"].isin(ids)], strata=(stratum,))


def _trial_repeats(summary: pd.DataFrame) -> Dict[str, List[int]]:
    """cell -> its trials' repeat numbers, whatever their status (the rounds each took part in)."""
    if summary.empty:
        return {}
    return {str(c): [int(r) for r in g] for c, g in summary.groupby("cell_id", sort=False)["repeat"]}


def run_sequential_config(run: Path) -> Optional[SequentialConfig]:
    """The `sequential:` bounds of a run launched with repeats=auto (multirun.yaml); None otherwise."""
    from sweeper.results import launch_config

    values = launch_config(run)
    if values.get("repeats") != AUTO:
        return None
    known = {f.name for f in dataclasses.fields(SequentialConfig)}
    cfg = SequentialConfig(**{k: v for k, v in (values.get("sequential") or {}).items() if k in known})
    cfg.check()
    return cfg


def run_cost_config(run: Path) -> CostConfig:
    """The `cost:` section that the run was launched with (multirun.yaml), or no prices."""
    from sweeper.results import launch_config

    values = launch_config(run).get("cost")
    cfg = CostConfig(**{k: v for k, v in (values or {}).items() if k in ("gpu_hour_usd", "cpu_hour_usd")})
    cfg.gpu_hour_usd = dict(cfg.gpu_hour_usd or {})
    cfg.check()
    return cfg


def analysis_config(values: Optional[Dict[str, Any]]) -> AnalysisConfig:
    """AnalysisConfig from the resolved `analysis:` dict of a root config (checked)."""
    values = dict(values or {})
    constraints = ConstraintsConfig(**(values.pop("constraints", None) or {}))
    known = {f.name for f in dataclasses.fields(AnalysisConfig)}
    cfg = AnalysisConfig(**{k: v for k, v in values.items() if k in known}, constraints=constraints)
    cfg.heatmap = list(cfg.heatmap or [])
    cfg.check()
    return cfg


def run_analysis_config(run: Path) -> AnalysisConfig:
    """The `analysis:` section that the run was launched with (multirun.yaml), or defaults."""
    from sweeper.results import launch_config

    return analysis_config(launch_config(run).get("analysis"))


def _verdict_columns() -> List[str]:
    return [f"{m}_{n}" for m in METRICS for n in VERDICT_COLUMNS] + ["verdict", STOPPED, LEFT_OUT]


def cell_summary(analysis: Analysis) -> pd.DataFrame:
    """The analysis' per-cell table, best first (the verdict table's order): swept values,
    status, figures with intervals, headline figures, memory, and each metric's verdict
    columns. What cells.parquet / cells.csv hold, for notebooks."""
    cells = analysis.cells[_cell_columns(analysis)]
    if cells.empty or analysis.verdicts.empty:
        return cells.reset_index(drop=True)
    verdicts = analysis.verdicts[["cell_id", *(c for c in _verdict_columns() if c in analysis.verdicts)]]
    ordered = verdicts[["cell_id"]].merge(cells, on="cell_id")
    return ordered.merge(verdicts, on="cell_id", suffixes=(False, False))    # a clash of names fails here


def _cell_columns(analysis: Analysis) -> List[str]:
    """Identity, figures with their intervals, the spread, headline figures, resources."""
    first = ["cell_id", "cell", "stratum", *analysis.axes, "is_baseline", "status", "repeats", "failed", "steps"]
    figures = [f"{name}{end}" for name in ("items_per_s", "p50", "p95", "mean", "std", "cv")
               for end in ("", "_low", "_high")]
    ordered = first + figures + [h[0] for h in analysis.workload.headline]
    present = [c for c in dict.fromkeys(ordered) if c in analysis.cells.columns]
    return present + [c for c in analysis.cells.columns if c not in present]
