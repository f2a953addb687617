"""Regressions across nights: a change-point method over each cell's series, and a significance
test of each night against the last good night. Pure over the history frame (store.read).

Per (machine, sweep, cell) and per metric (throughput, p95), nights in time order:

- **Change points**: asv's `step_detect` (the `asv` package, airspeed velocity's own
  regression finder). `detect_steps` fits a piecewise-constant function to the nightly figure
  (an L1 fit, so one wild night moves it little) with a penalty per step chosen by an
  information criterion (4 ln(n)/n per breakpoint, BIC-like; `solve_potts_autogamma`), and
  `detect_regressions` keeps only upward steps (worse: time per item or p95 up) larger than
  the segments' own spread and than `history.step_threshold` (relative), dropping a step of a
  single night that comes back (min_size=2 unless it is the latest night). Those are its
  false-alarm controls. Series go in as "lower is better": seconds per item (1 / items/s), p95.
- **Against the last good night**: the night's per-repeat values against those of the latest
  earlier night that raised no alert, with the analysis' exact Mann-Whitney test
  (`sweeper.analysis.stats.compare_cells`: alpha and minimum effect from `analysis.*`); where
  the two nights' repeats are too few for it to ever reach alpha (repeats=auto stops a decided
  cell at 2 or 3), Welch's t-test on the log values instead (`night_test`).
- **Alert** when the night's figure passes the baseline's by `history.alert_ratio` (1.15:
  items/s below baseline / 1.15, or p95 above baseline x 1.15) AND there is evidence: the test
  says slower, or asv puts a change point between the last good night and this one (a level
  shift in the nightly figures, which the per-repeat test misses when each repeat's p95 over
  few steps is noisy, or when the repeats are too few to ever reach alpha). `evidence` names it.
  A night that passes the ratio is never the next baseline, alert or not.

The figures are the stored Analysis figures (median over the cell's repeats of each repeat's
value); nothing here recomputes a throughput.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Set

import numpy as np
import pandas as pd

from sweeper.analysis import stats

# metric -> (figure column, per-repeat list column, higher is better)
METRICS = {"throughput": ("items_per_s", "repeat_items_per_s", True), "p95": ("p95", "repeat_p95", False)}
SERIES = ["machine", "sweep", "cell_id"]
_RESAMPLES = 199      # compare_cells also bootstraps the ratio's interval, which no alert reads: keep it cheap


@dataclass(frozen=True)
class Settings:
    alert_ratio: float = 1.15      # history.alert_ratio
    step_threshold: float = 0.05   # history.step_threshold: asv's smallest relative step
    alpha: float = 0.05            # analysis.alpha
    min_effect: float = 0.05       # analysis.min_effect
    window: int = 60               # history.window: the latest nights of a series that are assessed


@dataclass(frozen=True)
class Alert:
    """A cell whose night passed its last good night by the alert ratio, with the evidence."""
    machine: str
    sweep: str
    cell_id: str
    cell: str
    metric: str
    run_id: str
    date: str
    value: float
    baseline_run: str
    baseline_value: float
    ratio: float           # > 1: worse (baseline items/s / night's; night's p95 / baseline's)
    p_value: float
    verdict: str
    since: str             # the run where the change point puts the step ("" if none)
    evidence: str          # "significant", "change point" or "significant + change point"

    def line(self) -> str:
        what = "items/s" if self.metric == "throughput" else "p95 step time"
        since = f", step since {self.since}" if self.since and self.since != self.run_id else ""
        return (f"{self.sweep} {self.cell} on {self.machine}: {what} {self.ratio:.2f}x worse than "
                f"{self.baseline_run} (p={self.p_value:.3g}, {self.evidence}{since})")

    def to_dict(self) -> Dict:
        return asdict(self)


# --------------------------------------------------------------------------- change points


def cost_series(nights: pd.DataFrame, metric: str) -> List[float]:
    """The night figures as asv wants them, lower is better: s/item for throughput, p95 as is."""
    column, _, higher = METRICS[metric]
    values = nights[column].astype(float).to_numpy()
    if higher:
        values = np.where(values > 0, 1.0 / values, np.nan)
    return [float(v) if math.isfinite(v) else math.nan for v in values]


_ASV = "_sweeper_asv"     # asv's folder under a private package name (see _step_detect)


def _step_detect():
    """asv's step_detect module, without running asv's package __init__: that loads every asv
    plugin (environment managers, ...), 0.8 s at each sweep's end for one pure module that
    needs only the standard library and its own C helper (_rangemedian, found in the same folder)."""
    import importlib
    import importlib.util
    import sys
    import types

    if _ASV not in sys.modules:
        spec = importlib.util.find_spec("asv")           # finds the package; runs none of it
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("asv is not installed: pip install 'asv>=0.6.6,<0.7'")
        package = types.ModuleType(_ASV)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[_ASV] = package
    return importlib.import_module(f"{_ASV}.step_detect")


def step_nights(costs: Sequence[float], threshold: float) -> Dict[int, int]:
    """{index of the night a regression step starts: index of the last night before it}, by
    asv.step_detect over the whole series (NaN nights are skipped)."""
    if sum(1 for c in costs if c == c) < 3:         # a step needs a level before and after it
        return {}
    asv = _step_detect()
    _, _, regressions = asv.detect_regressions(asv.detect_steps(list(costs)), threshold=threshold)
    return {after: before for before, after, _, _ in (regressions or []) if after is not None}


# --------------------------------------------------------------------------- against the last good night


def _ratio(night: float, base: float, higher: bool) -> float:
    if not (math.isfinite(night) and math.isfinite(base)) or night <= 0 or base <= 0:
        return math.nan
    return base / night if higher else night / base


def assess_series(nights: pd.DataFrame, metric: str, settings: Settings) -> pd.DataFrame:
    """One row per night of one cell's series (oldest first): its figure, the last good night,
    the ratio (> 1 worse), the test, whether a change point starts there, and the alert."""
    column, repeats_column, higher = METRICS[metric]
    nights = nights.tail(settings.window).reset_index(drop=True)
    steps = step_nights(cost_series(nights, metric), settings.step_threshold)
    run_ids = list(nights["run_id"])
    rows, good = [], None         # good: index of the last night within the ratio of its own baseline
    for i, night in enumerate(nights.to_dict("records")):
        row = {"machine": night["machine"], "sweep": night["sweep"], "cell_id": night["cell_id"],
               "cell": night["cell"], "run_id": night["run_id"], "date": night["date"], "metric": metric,
               "value": float(night[column]), "step": i in steps, "since": _since(i, steps, run_ids),
               "baseline_run": "", "baseline_value": math.nan, "ratio": math.nan, "p_value": math.nan,
               "verdict": "", "evidence": "", "passed": False, "alert": False}
        if good is not None:
            stepped = any(good < s <= i for s in steps)     # a change point since the last good night
            row.update(_against(nights.iloc[good], night, metric, settings, stepped))
        rows.append(row)
        if night["repeats"] > 0 and math.isfinite(row["value"]) and not row["passed"]:
            good = i          # within the ratio of the last good night: the next baseline
    return pd.DataFrame(rows)


def _since(i: int, steps: Dict[int, int], run_ids: List[str]) -> str:
    """The run of the latest change point at or before night i."""
    starts = [s for s in steps if s <= i]
    return run_ids[max(starts)] if starts else ""


def night_test(base: Sequence[float], night: Sequence[float], settings: Settings, higher: bool) -> stats.Comparison:
    """The night's repeats against the last good night's: the analysis' exact Mann-Whitney test,
    or, where these repeat counts cannot reach alpha with it, Welch's t-test on the log values.
    repeats=auto stops a decided cell early, often at 2 or 3 repeats, and 2 against 2 gives a
    Mann-Whitney p of 0.33 at best: no regression could ever be significant."""
    comparison = stats.compare_cells(list(base), list(night), settings.alpha, settings.min_effect,
                                     higher_is_better=higher, n_resamples=_RESAMPLES)   # its interval is not used
    if comparison.verdict != stats.TOO_FEW:
        return comparison
    p = welch_log_p(base, night)
    return dataclasses.replace(comparison, p_value=p, p_adjusted=p, verdict=_t_verdict(comparison.ratio, p, settings,
                                                                                          higher))


def welch_log_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch t-test p over log values (positive, finite ones); NaN under 2 values a side."""
    from scipy.stats import ttest_ind

    from sweeper.analysis.sequential import logs

    la, lb = logs(a), logs(b)
    if min(la.size, lb.size) < 2 or (np.ptp(la) == 0 and np.ptp(lb) == 0):
        return math.nan
    return float(ttest_ind(la, lb, equal_var=False).pvalue)


def _t_verdict(ratio: float, p: float, settings: Settings, higher: bool) -> str:
    """stats.decide's rule for one test: significant and beyond the minimum effect either way."""
    if not p < settings.alpha or not (ratio > 0 and math.isfinite(ratio)):
        return stats.NO_CHANGE
    if max(ratio, 1 / ratio) < 1 + settings.min_effect:
        return stats.within(settings.min_effect)
    return stats.FASTER if (ratio > 1) == higher else stats.SLOWER


def _against(base: pd.Series, night: Dict, metric: str, settings: Settings, stepped: bool) -> Dict:
    column, repeats_column, higher = METRICS[metric]
    comparison = night_test(base[repeats_column], night[repeats_column], settings, higher)
    ratio = _ratio(float(night[column]), float(base[column]), higher)
    passed = math.isfinite(ratio) and ratio >= settings.alert_ratio
    evidence = " + ".join(e for e, found in (("significant", comparison.verdict == stats.SLOWER),
                                              ("change point", stepped)) if found)
    return {"baseline_run": base["run_id"], "baseline_value": float(base[column]), "ratio": ratio,
            "p_value": comparison.p_value, "verdict": comparison.verdict, "passed": passed,
            "evidence": evidence if passed else "", "alert": bool(passed and evidence)}


def assess(frame: pd.DataFrame, settings: Settings = Settings(),
           metrics: Sequence[str] = tuple(METRICS)) -> pd.DataFrame:
    """assess_series for every cell series of the history frame and each metric."""
    parts = []
    for _, nights in frame.sort_values("started_at", kind="stable").groupby(SERIES, sort=False):
        for metric in metrics:
            parts.append(assess_series(nights.reset_index(drop=True), metric, settings))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def alerts_of(assessed: pd.DataFrame, run_ids: Optional[Set[str]] = None) -> List[Alert]:
    """The alerts of the given runs (default: each series' latest night)."""
    if assessed.empty:
        return []
    if run_ids is None:
        latest = assessed.groupby(SERIES + ["metric"], sort=False).tail(1)
    else:
        latest = assessed[assessed["run_id"].isin(run_ids)]
    fields = Alert.__dataclass_fields__
    return [Alert(**{k: row[k] for k in fields}) for row in latest[latest["alert"]].to_dict("records")]
