"""Tables of the history store, as (header, rows) of text: the CLI prints them, the morning
report renders them as HTML. Every figure is a stored Analysis figure or the assessment's."""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

import pandas as pd

from sweeper.analysis.text import num, pvalue, rate_digits
from sweeper.errors import SweeperError

Table = Tuple[List[str], List[List[str]]]
# fingerprint fields a night-to-night change in them is worth a line
FINGERPRINT_KEYS = ("host", "gpu_name", "gpu_count", "gpu_uuids", "driver", "cuda", "cudnn", "nccl", "torch",
                    "python", "cpu_model", "cpu_count", "platform", "git_commit")


def runs_table(runs: pd.DataFrame) -> Table:
    header = ["date", "sweep", "run", "machine", "GPU", "driver", "cells", "repeats", "failed", "tool"]
    rows = [[r.date, r.sweep, r.run_id, r.machine, r.gpu_name or "-", r.driver or "-", str(r.cells),
             str(int(r.repeats)), str(int(r.failed)), r.tool_version] for r in runs.itertuples()]
    return header, rows


def _figure(metric: str, value: Any) -> str:
    if metric == "throughput":
        return num(value, 1.0, rate_digits(value))
    return num(value, 1e3, 3)       # p95 in ms


def trend_table(assessed: pd.DataFrame, metric: str) -> Table:
    """Per cell, one row per night: figure, ratio to the last good night, test, step, alert."""
    unit = "items/s" if metric == "throughput" else "p95 ms"
    header = ["cell", "date", "run", unit, "x worse vs last good", "last good", "p", "change point", "alert"]
    rows = []
    for r in assessed[assessed["metric"] == metric].itertuples():
        rows.append([r.cell, r.date, r.run_id, _figure(metric, r.value), num(r.ratio, 1.0, 3),
                     r.baseline_run or "-", pvalue(r.p_value), "step" if r.step else "",
                     "ALERT" if r.alert else ""])
    return header, rows


def alerts_table(alerts) -> Table:
    header = ["sweep", "cell", "metric", "run", "x worse", "last good", "p", "evidence", "since", "machine"]
    rows = [[a.sweep, a.cell, a.metric, a.run_id, num(a.ratio, 1.0, 3), a.baseline_run, pvalue(a.p_value),
             a.evidence, a.since or "-", a.machine] for a in alerts]
    return header, rows


# --------------------------------------------------------------------------- two nights


def find_run(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of one run, named by its run id or sweep/run-id; a clear error otherwise."""
    sweep, _, run_id = name.rpartition("/")
    rows = frame[(frame["run_id"] == run_id) & ((frame["sweep"] == sweep) if sweep else True)]
    found = rows.groupby(["machine", "sweep", "run_id"]).size()
    if found.empty:
        known = ", ".join(frame["run_id"].drop_duplicates().tail(5)) or "none"
        raise SweeperError(f"no run {name!r} in the history store (latest runs: {known}); see `list`")
    if len(found) > 1:
        names = ", ".join(f"{s}/{r} on {m}" for m, s, r in found.index)
        raise SweeperError(f"run {name!r} is ambiguous ({names}): name it as SWEEP/RUN, or pass --machine")
    return rows


def _flat_fingerprint(text: str) -> Dict[str, str]:
    fp = json.loads(text or "{}")
    out = {k: _text(fp.get(k)) for k in FINGERPRINT_KEYS if k in fp}
    out.update({f"package {k}": str(v) for k, v in (fp.get("packages") or {}).items()})
    return out


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def changed(a: Dict[str, str], b: Dict[str, str]) -> List[List[str]]:
    """[key, a's value, b's value] for each key whose value differs (missing: "-")."""
    keys = sorted(set(a) | set(b))
    return [[k, a.get(k, "-"), b.get(k, "-")] for k in keys if a.get(k) != b.get(k)]


def fingerprint_changes(a: pd.DataFrame, b: pd.DataFrame) -> Table:
    return ["fingerprint", "before", "after"], changed(_flat_fingerprint(a["fingerprint"].iloc[0]),
                                                      _flat_fingerprint(b["fingerprint"].iloc[0]))


def settings_changes(a: pd.DataFrame, b: pd.DataFrame) -> Table:
    """The settings that shape a trial (sweeper.schema.roles: measurement, placement) that changed."""
    from sweeper.schema.roles import shapes_trials

    def shaping(row: pd.DataFrame) -> Dict[str, str]:
        return {k: v for k, v in json.loads(row["settings"].iloc[0] or "{}").items() if shapes_trials(k)}
    return ["setting", "before", "after"], changed(shaping(a), shaping(b))


def figures_changes(a: pd.DataFrame, b: pd.DataFrame) -> Table:
    """Per cell of either night: items/s and p95 before, after and their ratio (after / before)."""
    header = ["cell", "items/s before", "items/s after", "ratio", "p95 ms before", "p95 ms after", "ratio"]
    merged = a.merge(b, on="cell_id", how="outer", suffixes=("_a", "_b"))
    rows = []
    for r in merged.to_dict("records"):
        cell = r["cell_a"] if isinstance(r.get("cell_a"), str) else r["cell_b"]
        rows.append([cell, _figure("throughput", r.get("items_per_s_a")), _figure("throughput", r.get("items_per_s_b")),
                     num(_div(r.get("items_per_s_b"), r.get("items_per_s_a")), 1.0, 3),
                     _figure("p95", r.get("p95_a")), _figure("p95", r.get("p95_b")),
                     num(_div(r.get("p95_b"), r.get("p95_a")), 1.0, 3)])
    return header, rows


def _div(b: Any, a: Any) -> float:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return math.nan
    return b / a if a and math.isfinite(a) and math.isfinite(b) else math.nan


def previous_run(frame: pd.DataFrame, run: pd.DataFrame) -> Optional[pd.DataFrame]:
    """The rows of the night before `run` (same machine and sweep), or None."""
    first = run.iloc[0]
    same = frame[(frame["machine"] == first["machine"]) & (frame["sweep"] == first["sweep"])
                 & (frame["started_at"] < first["started_at"])]
    if same.empty:
        return None
    return same[same["run_id"] == same.sort_values("started_at")["run_id"].iloc[-1]]
