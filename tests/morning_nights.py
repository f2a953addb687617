"""A small history for the morning report, built in-process through the real store: rows as a
sweep's end appends them (store.rows_of_run's columns), night after night.

- sweep `nightly`, 5 nights on one machine, 3 cells against the baseline workers=0:
  workers=2 never moves; workers=4 runs 2,000 items/s for 4 nights, then 1,300 on the last
  (the cell that moved: 1.54x worse, 5 repeats each side, so the test says slower too);
  workers=8 is new on the last night;
- sweep `fresh`, only the last night: its first night, 2 cells, no history.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from sweeper.analysis.stats import FASTER, NO_CHANGE, SLOWER, within
from sweeper.history.store import append_rows, read

DAY, T0, MACHINE, NIGHTS = 86400.0, 1_780_000_000.0, "vm-0123456789", 5
MOVED, NEW = "workers=4", "workers=8"
NIGHTLY_REC = ("recommended: workers=4: +30.0% faster than the baseline (1,300 vs 1,000 items/s), "
               "interval [+27.1%, +33.2%] (faster; judged on throughput, items per second of each repeat)")
FRESH_REC = ("recommended: keep the baseline batch_size=8: no configuration is detectably faster "
             "(judged on throughput, items per second of each repeat)")
# cell -> (items/s per night, the last night's verdict, its ratio to the baseline, why it stopped)
# nightly ran repeats=auto (each cell says why it got no more repeats), fresh fixed repeats (None)
NIGHTLY = {"workers=0": ([1000.0] * NIGHTS, "baseline", 1.0, ""),
           "workers=2": ([1030.0] * NIGHTS, NO_CHANGE, 1.03, "decided"),
           MOVED: ([2000.0] * (NIGHTS - 1) + [1300.0], FASTER, 1.30, "decided"),
           NEW: ([None] * (NIGHTS - 1) + [1040.0], within(0.05), 1.04, "at its maximum")}
START = {"nightly": 0.0, "fresh": 3600.0}        # the suite runs its sweeps in turn
FRESH = {"batch_size=8": ([500.0], "baseline", 1.0, None), "batch_size=16": ([400.0], SLOWER, 0.80, None)}


def cell_row(sweep: str, night: int, cell: str, items: float, rng: np.random.Generator) -> Dict:
    """One cell of one night: 5 repeats around `items` (1% noise), p95 from the step time."""
    repeats = [float(v) for v in items * (1.0 + rng.normal(0.0, 0.01, 5))]
    p95s = [8.0 / r * 1.2 for r in repeats]
    return {"machine": MACHINE, "host": "vm", "sweep": sweep, "run_id": f"n{night}", "date": f"2026-06-0{night}",
            "run_dir": str(Path("/nights") / sweep / f"n{night}"), "started_at": T0 + night * DAY + START[sweep],
            "appended_at": T0 + night * DAY + START[sweep] + 60, "metric": "throughput", "fingerprint": "{}", "settings": "{}",
            "cell_id": f"{sweep}-{cell}", "cell": cell, "status": "ok", "repeats": 5, "failed": 0,
            "items_per_s": float(np.median(repeats)), "p95": float(np.median(p95s)),
            "repeat_items_per_s": repeats, "repeat_p95": p95s, "stratum": ""}


def decided(row: Dict, verdict: str, ratio: float, stopped: Optional[str], recommendation: str) -> Dict:
    """The row with its decision as the run's Analysis gave it."""
    interval = (ratio, ratio) if verdict == "baseline" else (ratio * 0.98, ratio * 1.02)
    return {**row, "is_baseline": verdict == "baseline", "verdict": verdict, "verdict_ratio": ratio, "stopped": stopped,
            "verdict_ratio_low": interval[0] if verdict != "baseline" else None,
            "verdict_ratio_high": interval[1] if verdict != "baseline" else None,
            "verdict_p": None if verdict == "baseline" else 0.012, "recommendation": recommendation}


def night_rows(sweep: str, cells: Dict, night: int, first: int, recommendation: str,
               rng: np.random.Generator) -> pd.DataFrame:
    rows = [decided(cell_row(sweep, night, cell, figures[night - first], rng), verdict, ratio, stopped, recommendation)
            for cell, (figures, verdict, ratio, stopped) in cells.items() if figures[night - first] is not None]
    return pd.DataFrame(rows)


def build(store: Path, seed: int = 3) -> pd.DataFrame:
    """Appends every night to `store` and returns the store as read back."""
    rng = np.random.default_rng(seed)
    for night in range(1, NIGHTS + 1):
        append_rows(store, night_rows("nightly", NIGHTLY, night, 1, NIGHTLY_REC, rng))
    append_rows(store, night_rows("fresh", FRESH, NIGHTS, NIGHTS, FRESH_REC, rng))
    return read(store)


def last_night_dirs() -> List[Path]:
    return [Path("/nights") / "nightly" / f"n{NIGHTS}", Path("/nights") / "fresh" / f"n{NIGHTS}"]
