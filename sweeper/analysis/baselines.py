"""A run's strata and each one's baseline, from its cell table (the rules: strata.py).

A run without strata keys is one stratum labelled "", whose baseline is the cell that
analysis.baseline names, else the one the plan marked, else the first. A split run's stratum
of two cells or more gets the configured baseline with its own values of the strata keys,
else the marked cell, else its first; a lone cell gets none (ALONE). Pure over DataFrames.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from sweeper.analysis import strata as rules
from sweeper.analysis.model import ALONE, STRATUM, Stratum
from sweeper.analysis.text import cell_label
from sweeper.schema import AnalysisConfig


def lookups(cells: pd.DataFrame, axes: Sequence[str]) -> List[rules.Lookup]:
    """Each cell's value of a key: its column, else the axis the key is a tail of."""
    def lookup(row: Dict[str, Any]) -> rules.Lookup:
        def value(key: str) -> Any:
            column = key if key in row else rules.resolve(key, axes)
            if column is None or column not in row:
                raise KeyError(key)
            return row[column]
        return value
    return [lookup(row) for row in cells.to_dict("records")]


def pick_baseline(cells: pd.DataFrame, spec: Optional[str], axes: Sequence[str],
                  where: str = "this run") -> Tuple[Optional[str], List[str]]:
    """(baseline cell_id, notes): the cell `spec` names, else the one the plan marked, else the first."""
    if cells.empty:
        return None, []
    if spec:
        found = rules.first_match(lookups(cells, axes), spec)
        if found is not None:
            return str(cells["cell_id"].iloc[found]), []
        return None, [f"analysis.baseline={spec!r} matches no cell of {where}; no verdicts"]
    marked = cells.loc[cells["is_baseline"], "cell_id"]
    if len(marked):
        return str(marked.iloc[0]), []
    return str(cells["cell_id"].iloc[0]), ["no cell is marked as the baseline: the first cell is used"]


def split_keys(summary: pd.DataFrame, axes: Sequence[str], cfg: AnalysisConfig,
               workloads: int) -> Tuple[List[str], List[str]]:
    """(the columns that split the run into strata, notes): each strata key that is a swept axis
    of this run with two values or more."""
    keys, notes = [], []
    for key in rules.strata_keys(cfg.compare_within or [], workloads):
        column = key if key == rules.WORKLOAD else rules.resolve(key, [a for a in axes if a != rules.WORKLOAD])
        if column in keys:
            continue
        if column is None or summary[column].astype(str).nunique() < 2:    # one value: one stratum, no split
            notes.append(f"analysis.compare_within: {key} has one value in this run, so it splits nothing")
        else:
            keys.append(column)
    return keys, notes


def strata_of(cells: pd.DataFrame, keys: Sequence[str], names: Dict[str, str], cfg: AnalysisConfig,
              axes: Sequence[str]) -> Tuple[pd.DataFrame, Tuple[Stratum, ...], List[str]]:
    """(cells with their stratum's label when the run is split, the strata with their baselines, notes)."""
    if cells.empty:
        return cells, (Stratum("", ()),), []
    if not keys:
        base, notes = pick_baseline(cells, cfg.baseline, axes)
        marked = cells.assign(is_baseline=cells["cell_id"] == base) if base is not None else cells
        return marked, (Stratum("", tuple(cells["cell_id"]), base),), notes
    labels = [cell_label({k: row[k] for k in keys}, names) for row in cells.to_dict("records")]
    cells = cells.copy()
    cells.insert(2, STRATUM, labels)
    found, notes = [], []
    for members in rules.groups(lookups(cells, axes), keys):
        mine = cells.iloc[members]
        base, why = _stratum_baseline(mine, cfg.baseline, axes, keys, labels[members[0]])
        found.append(Stratum(labels[members[0]], tuple(mine["cell_id"]), base, alone=len(members) == 1))
        notes += why
    bases = {s.baseline_id for s in found}
    return cells.assign(is_baseline=cells["cell_id"].isin(bases)), tuple(found), notes


def _stratum_baseline(cells: pd.DataFrame, spec: Optional[str], axes: Sequence[str], keys: Sequence[str],
                      label: str) -> Tuple[Optional[str], List[str]]:
    if len(cells) < 2:
        return None, []
    return pick_baseline(cells, rules.within_stratum(spec, keys), axes, where=f"stratum {label}")


def strata_note(strata: Sequence[Stratum], keys: Sequence[str], names: Dict[str, str],
                workloads: Sequence[str]) -> str:
    lone = sum(1 for s in strata if s.alone)
    if lone == len(strata):
        return (f"this run holds {len(strata)} cells that measure different things ({', '.join(workloads)}): "
                f"none is judged against another; each workload's own comparison comes last")
    why = (f"this run holds {len(workloads)} workloads ({', '.join(workloads)}), which measure different "
           f"things: each is compared only with cells of its own workload; " if rules.WORKLOAD in keys else "")
    alone = f"; {lone} cell(s) alone in their stratum get no verdict ({ALONE!r})" if lone else ""
    return (f"{why}compared within {', '.join(names.get(k, k) for k in keys)}: {len(strata)} strata, each with "
            f"its own baseline, verdicts (Holm within the stratum), noise floor and recommendation{alone}")
