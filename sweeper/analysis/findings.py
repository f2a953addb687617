"""What the analysis finds beside the verdicts: pitfalls per trial, cost and scaling per cell,
the fleet's slow devices, and the notes that say what the verdicts cannot. Pure: each function
returns new values and changes none of its inputs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from sweeper.analysis import cost as costs
from sweeper.analysis import slow, stats
from sweeper.analysis.model import Column, Stratum
from sweeper.analysis.pitfalls import trial_pitfalls
from sweeper.schema import AnalysisConfig

PITFALL_COLUMNS = ["trial_id", "cell_id", "cell", "code", "message"]


@dataclass(frozen=True)
class Findings:
    cells: pd.DataFrame              # with pitfalls, cost and scaling columns
    pitfalls: pd.DataFrame
    extra: Tuple[Column, ...]
    cost_column: Optional[str]
    notes: Tuple[str, ...]


def findings(cells: pd.DataFrame, records: Sequence[Dict[str, Any]], cost: Any, items_label: str,
             axes: Sequence[str]) -> Findings:
    """Pitfalls per trial (and their codes per cell), cost and scaling columns per cell."""
    if cells.empty:
        return Findings(cells, pd.DataFrame(), (), None, ())
    labels = dict(zip(cells["cell_id"], cells["cell"]))
    rows = [{"trial_id": r["trial_id"], "cell_id": r.get("cell_id"), "cell": labels.get(r.get("cell_id"), ""),
             "code": p.code, "message": p.message} for r in records for p in trial_pitfalls(r)]
    pitfalls = pd.DataFrame(rows, columns=PITFALL_COLUMNS)
    by_cell = pitfalls.groupby("cell_id")["code"].agg(lambda c: ";".join(sorted(set(c)))).to_dict()
    cells = cells.assign(pitfalls=[by_cell.get(c, "") for c in cells["cell_id"]])
    cells, notes, column = costs.cost_columns(cells, records, cost, items_label)
    cells = costs.scaling_columns(cells, axes)
    extra: List[Column] = []
    if column is not None:
        extra.append((column, f"$/M {column.rsplit('_', 1)[-1]}", 1.0, 4))
    if "scaling_efficiency" in cells.columns:
        extra.append(("scaling_efficiency", "scaling eff.", 1.0, 3))
    return Findings(cells, pitfalls, tuple(extra), column, tuple(notes))


def fleet_notes(fleet: pd.DataFrame) -> List[str]:
    slow = fleet[fleet["outlier"]] if not fleet.empty else fleet
    return [f"fleet: {row['device']} (node {str(row['node'])[:12]}) is slower than its peers on cell "
            f"{row['cell_id']}: {row['ratio']:.3f}x their items/s, p {row['p_adj']:.3g} after Holm"
            for row in slow.to_dict("records")]


def _baselines_without_result(cells: pd.DataFrame, strata: Sequence[Stratum],
                              comparisons: Dict[str, stats.Comparison]) -> List[str]:
    """The labels of the strata's baselines whose cells the verdicts could not judge: NO_BASELINE."""
    labels = dict(zip(cells["cell_id"], cells["cell"])) if not cells.empty else {}
    return [str(labels.get(s.baseline_id, s.baseline_id)) for s in strata if s.baseline_id is not None
            and any(c in comparisons and comparisons[c].verdict == stats.NO_BASELINE for c in s.cell_ids)]


def verdict_notes(cells: pd.DataFrame, repeats: pd.DataFrame, strata: Sequence[Stratum], cfg: AnalysisConfig,
                  comparisons: Dict[str, stats.Comparison]) -> List[str]:
    """What the verdicts cannot say: too few repeats, a drifting machine, nothing to judge."""
    notes = []
    judged = len(strata) == 1 or any(s.baseline_id is not None for s in strata)   # some cell has a baseline
    family = max([len(s.cell_ids) - 1 for s in strata if s.baseline_id is not None] or [0])
    failed_bases = _baselines_without_result(cells, strata, comparisons)
    if judged and not cells.empty and (cells["repeats"] <= 1).all():
        notes.append("one repeat per cell: no verdicts are possible; run with repeats=5 or more "
                     "(each repeat is a fresh process, the unit of evidence)")
    elif failed_bases:
        notes.append(f"the baseline {', '.join(failed_bases)} has no "
                     f"successful repeat, so no cell was compared with it (their verdicts read "
                     f"'{stats.NO_BASELINE}'); see why its trials failed")
    elif any(c.verdict == stats.TOO_FEW for c in comparisons.values()):
        notes.append(f"too few repeats: with {family} comparisons and Holm's correction, no p-value "
                     f"these repeat counts allow can reach alpha={cfg.alpha}; raise repeats")
    if any(s.noise_floor is not None and s.noise_floor.verdict in (stats.FASTER, stats.SLOWER) for s in strata):
        notes.append("the baseline differs from itself (A/A): the machine drifted during the sweep; "
                     "treat the verdicts with suspicion")
    if cfg.metric == "throughput" and not repeats.empty and repeats["items_per_s"].isna().all():
        notes.append("the trials recorded no items per step, so throughput cannot be judged; "
                     "use analysis.metric=p50")
    if "ci_over" in cells and (cells["ci_over"] == "none").any():
        notes.append("some cells have no steps.parquet: their figures come from the summary, without intervals")
    return notes + slow_repeat_notes(repeats)


def slow_repeats(repeats: pd.DataFrame) -> pd.DataFrame:
    """The repeats far below their cell's median items/s (slow.slow_masks, the rule repeats=auto's
    looks leave them out by), with how far (`below`, a fraction of the cell's median)."""
    rows = repeats[["trial_id", "cell_id", "items_per_s"]].dropna()
    rows = rows[rows["items_per_s"] > 0]
    cells = dict(tuple(rows.groupby("cell_id", sort=False)))
    logs = {c: np.log(g["items_per_s"].to_numpy(dtype=float)) for c, g in cells.items()}
    masks = slow.slow_masks(logs)
    flagged = [g.assign(below=1 - np.exp(logs[c] - np.median(logs[c])))[masks[c]] for c, g in cells.items()]
    return pd.concat(flagged) if flagged else rows.assign(below=[])


def slow_repeat_notes(repeats: pd.DataFrame) -> List[str]:
    """One line when some repeats ran far slower than the rest of their cell: the machine was
    likely busy then. repeats=auto's looks leave such repeats out; a fixed run's rank test counts
    each as one rank, but its intervals widen, so a verdict may still miss a real change."""
    if repeats.empty or "items_per_s" not in repeats:
        return []
    found = slow_repeats(repeats)
    if found.empty:
        return []
    worst = found.sort_values("below", ascending=False)
    named = ", ".join(f"{t} ({b:.0%} below)" for t, b in zip(worst["trial_id"][:3], worst["below"][:3]))
    more = f" and {len(worst) - 3} more" if len(worst) > 3 else ""
    return [f"slow repeats: {named}{more} ran far below their cell's other repeats (items/s): the machine "
            f"was likely busy then, and verdicts may miss real changes (repeats=auto's looks leave out what the "
            f"same rule finds at each look; fixed repeats count every one); run again on a quiet machine"]
