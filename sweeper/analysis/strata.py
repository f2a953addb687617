"""The baseline and strata rules, one home for the plan and the analysis.

- A key names a setting by its dotted name or by a tail that one setting ends with
  ("num_workers" for data.num_workers); values match as typed (text.same_value: a swept 1.0
  matches "1" and "1.0").
- analysis.baseline "key=value key=value" names the baseline: the first cell that matches.
- Strata: `workload` when the run holds several, then each key of analysis.compare_within.
  Cells with the same values of the strata keys share a stratum, in order of first appearance.
  A stratum's baseline is the configured one with the stratum's own values of the strata keys
  (a key of analysis.baseline that is a strata key is left out).

Pure functions over plain values: plan.py asks them of its grid points, the analysis of its
cells (a cell's value of a key comes from a `lookup`).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from sweeper.analysis.text import same_value, value_text

Lookup = Callable[[str], Any]      # a cell's value of a key; raises KeyError when it has none
WORKLOAD = "workload"


def resolve(key: str, keys: Sequence[str]) -> Optional[str]:
    """The key of `keys` that `key` names, itself or by its dotted tail, or None."""
    return key if key in keys else next((k for k in keys if str(k).endswith("." + key)), None)


def wanted(spec: Optional[str]) -> Dict[str, str]:
    """analysis.baseline "key=value key=value" as {key: value}."""
    return dict(token.split("=", 1) for token in (spec or "").split())


def matches(lookup: Lookup, want: Dict[str, str]) -> bool:
    """Whether a cell has every wanted value (a key it has no value for matches nothing)."""
    for key, value in want.items():
        try:
            if not same_value(lookup(key), value):
                return False
        except KeyError:
            return False
    return True


def first_match(cells: Sequence[Lookup], spec: Optional[str]) -> Optional[int]:
    """Index of the first cell that analysis.baseline `spec` names, or None."""
    want = wanted(spec)
    return next((i for i, cell in enumerate(cells) if matches(cell, want)), None)


def strata_keys(compare_within: Sequence[str], workloads: int) -> List[str]:
    """The keys that split a run: the workload when it holds several, then analysis.compare_within."""
    return ([WORKLOAD] if workloads > 1 else []) + [k for k in compare_within if k != WORKLOAD]


def groups(cells: Sequence[Lookup], keys: Sequence[str]) -> List[List[int]]:
    """Cell indices per stratum, in order of first appearance (one stratum without keys)."""
    out: Dict[tuple, List[int]] = {}
    for i, cell in enumerate(cells):
        out.setdefault(tuple(value_text(_value(cell, k)) for k in keys), []).append(i)
    return list(out.values())


def _value(cell: Lookup, key: str) -> Any:
    try:
        return cell(key)
    except KeyError:
        return None


def within_stratum(spec: Optional[str], keys: Sequence[str]) -> Optional[str]:
    """analysis.baseline without the keys that split the run (each stratum has its own values)."""
    kept = {k: v for k, v in wanted(spec).items() if resolve(k, keys) is None and k not in keys}
    return " ".join(f"{k}={v}" for k, v in kept.items()) or None
