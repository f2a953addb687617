"""The data model of a run's analysis: `Analysis` and its parts, built once and never changed.

A run is a tuple of strata, always at least one. A run without strata (no
analysis.compare_within, one workload) is ONE stratum with the label "", so every view reads
`analysis.strata` the same way whatever the run's shape. Pure data: no computation here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pandas as pd

from sweeper.analysis.stats import Comparison
from sweeper.schema import METRICS, AnalysisConfig
from sweeper.spec import Column      # figure key, column label, scale, digits

__all__ = ["METRICS", "COLUMN", "HIGHER_IS_BETTER", "BASELINE", "FAILED", "ALONE", "STRATUM", "STOPPED",
           "VERDICT_COLUMNS", "Column", "RunData", "WorkloadView", "Stratum", "PairRatio", "Analysis"]

# the repeat-table column each metric (schema.METRICS, the choices of analysis.metric) compares,
# and which way is faster
COLUMN = {"throughput": "items_per_s", "p50": "p50", "p95": "p95"}
HIGHER_IS_BETTER = {"throughput", "items_per_s"}

BASELINE = "baseline"
FAILED = "failed"
ALONE = "alone in its stratum"     # the only cell of its stratum: nothing to compare it with
STRATUM = "stratum"                # the cells' column: "kind=images", the values of the strata keys
STOPPED = "stopped"                # repeats=auto: the verdicts' column saying why a cell got no more repeats
LEFT_OUT = "slow_left_out"         # repeats=auto: the slow repeats of the cell its last look left out
# per metric in the verdict table: {metric}_{name}; the ratio is cell / baseline, its 95% interval ratio_low/high
VERDICT_COLUMNS = ("ratio", "ratio_low", "ratio_high", "p", "p_adj", "delta", "verdict")



@dataclass(frozen=True)
class RunData:
    """One run folder: the summary (one row per trial), its measured steps, the records."""
    path: Path
    summary: pd.DataFrame
    steps: pd.DataFrame
    records: List[Dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class WorkloadView:
    """What the views need of the workload's spec (the record's `workload_spec`)."""
    name: str = ""
    items_label: str = "items"
    headline: Tuple[Column, ...] = ()
    memory: str = "host_mem_gb"           # the cells' memory column that is this workload's own


@dataclass(frozen=True)
class Stratum:
    """Cells compared only with each other: their baseline, noise floor and recommendation.
    `label` is "" when the run is one stratum; a lone cell of a split run has no baseline."""
    label: str
    cell_ids: Tuple[str, ...]
    baseline_id: Optional[str] = None
    noise_floor: Optional[Comparison] = None
    recommendation: Any = None            # recommend.Recommendation, or None
    alone: bool = False                   # the only cell of a split run's stratum: nothing to compare it with


@dataclass(frozen=True)
class PairRatio:
    """One microbenchmark's own comparison (its spec's `pairs`): `a` against `b`, the median over
    the cell's repeats of a / b."""
    cell: str
    workload: str
    a: str
    b: str
    unit: str
    ratio: float


@dataclass(frozen=True)
class Analysis:
    config: AnalysisConfig
    axes: Tuple[str, ...]
    names: Dict[str, str]        # axis -> its column header (shortest unique dotted tail)
    workload: WorkloadView
    repeats: pd.DataFrame        # one row per finished trial: its items/s, p50, p95, headline figures
    cells: pd.DataFrame          # one row per cell: figures with intervals, status, memory
    verdicts: pd.DataFrame       # one row per cell, best first: against its stratum's baseline, per metric
    strata: Tuple[Stratum, ...]  # at least one; a run without strata is one, labelled ""
    notes: Tuple[str, ...] = ()
    strata_keys: Tuple[str, ...] = ()    # the columns that split the run (analysis.compare_within, workload)
    pitfalls: pd.DataFrame = field(default_factory=pd.DataFrame)   # trial_id, cell_id, cell, code, message
    extra: Tuple[Column, ...] = ()       # figures the analysis adds per cell: cost, scaling
    cost_column: Optional[str] = None    # usd_per_m_tokens / usd_per_m_samples, when priced
    fleet: pd.DataFrame = field(default_factory=pd.DataFrame)   # each device against its peers (fleet.py)
    pairs: Tuple[PairRatio, ...] = ()         # each microbenchmark's own comparison (pairs.py)
    design: Any = None                   # repeats=auto: the sequential.Design its verdicts were decided with

    @property
    def metric(self) -> str:
        return self.config.metric

    @property
    def baselines(self) -> Dict[str, str]:
        """Stratum label -> its baseline cell_id, for the strata that have one."""
        return {s.label: s.baseline_id for s in self.strata if s.baseline_id is not None}

    def is_baseline(self, cell_id: Any) -> bool:
        """Whether the cell is the baseline of its stratum."""
        return cell_id in self.baselines.values()

    def judged_strata(self) -> List[Stratum]:
        """The strata with something to judge: all but the lone cells of a split run."""
        return [s for s in self.strata if not s.alone]

    # The one stratum's, for views of a run that has exactly one (None otherwise).
    @property
    def baseline_id(self) -> Optional[str]:
        return self.strata[0].baseline_id if len(self.strata) == 1 else None

    @property
    def noise_floor(self) -> Optional[Comparison]:
        return self.strata[0].noise_floor if len(self.strata) == 1 else None

    @property
    def recommendation(self) -> Any:
        return self.strata[0].recommendation if len(self.strata) == 1 else None
