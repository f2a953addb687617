"""The one analysis of a run, which every view reads.

    from sweeper.analysis.run import analyze_run, run_analysis_config
    data, analysis = analyze_run(run, run_analysis_config(run))

The driver calls `analyze_run` once when a sweep ends, with the records it holds; the
terminal tables, report.md/html, the W&B summary run, cells.parquet and the Prometheus
exporter are views of what it returns. Nothing is cached: call it once and pass it on.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from sweeper.analysis.cells import METRICS, VERDICT_COLUMNS, Analysis, RunData, analyze, load_run
from sweeper.schema import AnalysisConfig, ConstraintsConfig, CostConfig


def analyze_run(run: Path, cfg: AnalysisConfig, records: Optional[Sequence[Any]] = None,
                n_resamples: int = 2000, cost: Optional[CostConfig] = None) -> Tuple[RunData, Analysis]:
    """(RunData, Analysis) of a run folder. `records`: the trial records the caller holds
    (dicts or TrialRecords); None reads them from the folder. `cost`: the prices; None reads
    them from the run's multirun.yaml."""
    data = load_run(Path(run), records)
    cost = run_cost_config(Path(run)) if cost is None else cost
    return data, analyze(data.summary, data.steps, cfg, n_resamples=n_resamples, records=data.records, cost=cost)


def run_cost_config(run: Path) -> CostConfig:
    """The `cost:` section that the run was launched with (multirun.yaml), or no prices."""
    import yaml

    path = Path(run) / "multirun.yaml"
    values = (yaml.safe_load(path.read_text()) or {}).get("cost") if path.exists() else None
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
    import yaml

    path = Path(run) / "multirun.yaml"
    if not path.exists():
        return AnalysisConfig()
    values = yaml.safe_load(path.read_text()) or {}
    return analysis_config(values.get("analysis"))


def _verdict_columns() -> List[str]:
    return [f"{m}_{n}" for m in METRICS for n in VERDICT_COLUMNS] + ["verdict"]


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
