"""Each microbenchmark's own comparison: two figures one trial times side by side.

A workload's spec declares its pairs (sweeper.spec.Pair: pinned against pageable GB/s, arrow
against a list's time per access, ...); the trial record carries them in `workload_spec`, so
no view names a workload. A cell's ratio is the median over its finished repeats of a / b.
Pure over the records.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from sweeper.analysis.model import PairRatio
from sweeper.analysis.repeats import as_float, median
from sweeper.analysis.text import num, rate_digits


def pair_ratios(records: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> List[PairRatio]:
    """Per cell (in `labels`' order) and declared pair, the median of a / b over its repeats."""
    found: Dict[tuple, List[float]] = {}
    for record in records:
        spec = record.get("workload_spec") or {}
        if record.get("status") != "ok" or record.get("cell_id") not in labels:
            continue
        figures = record.get("figures") or {}
        for a, a_key, b, b_key, unit in spec.get("pairs") or ():
            found.setdefault((record["cell_id"], str(spec.get("name", "")), a, b, unit), []).append(
                _ratio(as_float(figures.get(a_key)), as_float(figures.get(b_key))))
    order = {cell: i for i, cell in enumerate(labels)}
    keys = sorted(found, key=lambda k: order[k[0]])           # stable: a cell's pairs in declared order
    return [PairRatio(labels[k[0]], k[1], k[2], k[3], k[4], median(found[k])) for k in keys]


def _ratio(a: float, b: float) -> float:
    return a / b if b and b == b else float("nan")      # b == b: not NaN


def pair_lines(pairs: Sequence[PairRatio]) -> List[str]:
    """One line per cell: "workload=h2d_copy: pinned vs pageable GB/s: 1.05x; ..."."""
    lines: Dict[str, List[str]] = {}
    for p in pairs:
        lines.setdefault(p.cell, []).append(f"{p.a} vs {p.b} {p.unit}: {num(p.ratio, 1.0, rate_digits(p.ratio))}x")
    return [f"{cell}: {'; '.join(parts)}" for cell, parts in lines.items()]
