"""What the driver prints: one progress line per finished trial, then the table.

Pure text formatting over records and summary rows, so it is tested by comparing strings.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

ISOLATION_WORDS = {
    "node": "one trial per node at a time",
    "gpu": "one trial per GPU",
    "pack": "trials packed by their CPU and GPU requests",
}


def short_key(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def _num(value: Any, scale: float = 1.0, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value * scale:,.{digits}f}"


def _swept_text(swept: Dict[str, Any]) -> str:
    return " ".join(f"{short_key(k)}={v}" for k, v in swept.items())


def progress_line(done: int, total: int, record: Dict[str, Any], wall_s: float) -> str:
    summary = record.get("summary", {})
    status = record["status"]
    width = len(str(total))
    if status == "ok":
        figures = (f"{_num(summary.get('items_per_s'), digits=0)} samples/s  "
                   f"p50 {_num(summary.get('step_p50_s'), 1e3, 2)} ms")
    else:
        figures = f"{record.get('error_type')}: {(record.get('error_message') or '')[:80]}"
    return (f"[{done:>{width}}/{total}] {status:<7} {record['trial_id']}  "
            f"{_swept_text(record.get('swept', {}))}  {figures}  ({wall_s:.1f} s)")


def _row_cells(row: Dict[str, Any], keys: Sequence[str]) -> List[str]:
    cells = []
    for key in keys:
        value = row.get(key)
        if short_key(key) == "pin_memory" and value is True and row.get("pin_memory_effective") is False:
            value = "True*"
        cells.append("-" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value))
    return cells + [
        _num(row.get("items_per_s"), digits=0),
        _num(row.get("step_p50_s"), 1e3, 2),
        _num(row.get("step_p95_s"), 1e3, 2),
        _num(row.get("time_to_first_batch_s"), 1.0, 3),
        str(row.get("status")),
        str(row.get("trial_id")),
    ]


def _single(rows: Sequence[Dict[str, Any]]) -> bool:
    return all("-" in str(r.get("trial_id", "-")) for r in rows)


def _sort_key(row: Dict[str, Any]) -> tuple:
    rate = row.get("items_per_s")
    ok = row.get("status") in ("ok",) or str(row.get("status", "")).endswith(" ok")
    ok = ok and rate is not None and math.isfinite(rate)
    return (0 if ok else 1, -(rate or 0.0))


_FIGURES = ("items_per_s", "step_p50_s", "step_p95_s", "time_to_first_batch_s")


def _median(values: List[float]) -> Any:
    values = sorted(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def cell_rows(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per grid point: the median of its finished repeats, and how many finished."""
    cells: Dict[Any, List[Dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault(row.get("cell_id") or row.get("trial_id"), []).append(row)
    out = []
    for cell, members in cells.items():
        ok = [m for m in members if m.get("status") == "ok"]
        merged = {**members[0], "trial_id": cell if len(members) > 1 else members[0].get("trial_id")}
        merged.update({k: _median([m.get(k) for m in ok]) for k in _FIGURES})
        if len(members) > 1:
            merged["status"] = "ok" if len(ok) == len(members) else f"{len(ok)}/{len(members)} ok"
        elif not ok:
            merged["status"] = members[0].get("status")
        out.append(merged)
    return out


def results_table(rows: Sequence[Dict[str, Any]], swept_keys: Sequence[str]) -> str:
    """One row per grid point (the median over its repeats), best first by samples/s;
    then the ones that did not finish."""
    rows = cell_rows(rows)
    header = [short_key(k) for k in swept_keys] + [
        "samples/s", "p50 ms", "p95 ms", "first batch s", "status", "trial" if _single(rows) else "cell"]
    body = [_row_cells(r, swept_keys) for r in sorted(rows, key=_sort_key)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    numeric = set(range(len(swept_keys), len(swept_keys) + 4))
    def fmt(cells):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(header), "  ".join("-" * w for w in widths)] + [fmt(b) for b in body]
    return "\n".join(line.rstrip() for line in lines)


def footer(rows: Sequence[Dict[str, Any]], isolation: str, run_path: str) -> str:
    lines = [f"isolation: {isolation} ({ISOLATION_WORDS.get(isolation, isolation)})"]
    if any(r.get("pin_memory_effective") is False and any(short_key(k) == "pin_memory" and v is True
                                                          for k, v in r.items()) for r in rows):
        lines.append("* pin_memory=True had no effect: no CUDA device in the trial")
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        lines.append(f"{len(failed)} trial(s) did not finish; to reproduce one:")
        lines += [f"  python -m sweeper {r.get('overrides', '')}  # {r.get('status')}: {r.get('error_type')}"
                  for r in failed[:10]]
    lines.append(f"results: {run_path}")
    return "\n".join(lines)
