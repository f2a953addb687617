"""cells.parquet and cells.csv in the run folder: the analysis' per-cell table, for notebooks.

    import pandas as pd
    cells = pd.read_parquet("results/dataloader/<run>/cells.parquet")

One row per cell, best first: swept values, status, repeats, items_per_s / p50 / p95 (the
median over the cell's repeats of each repeat's value, in items/s and seconds) with 95%
intervals, mean / std / cv of its pooled measured steps, the workload's headline figures,
peak memory (GB), and each metric's ratio to the baseline, p-values, Cliff's delta and
verdict. The same figures the terminal, report and W&B show. Written atomically.

fleet.parquet / fleet.csv (resources.every_device runs): one row per cell and device (GPU
UUID or node) against its peers, with the outlier flag and the device's clocks,
temperature and power (sweeper/analysis/fleet.py).
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Dict, Tuple

CELLS_BASENAME = "cells"


def write_cells(run: Path, analysis) -> Tuple[Path, Path]:
    """Writes cells.parquet and cells.csv (each to a temporary name, then os.replace)."""
    from sweeper.analysis.run import cell_summary

    return _write_both(Path(run), CELLS_BASENAME, _one_type_per_column(cell_summary(analysis)))


def _write_both(run: Path, basename: str, frame) -> Tuple[Path, Path]:
    parquet, csv = run / f"{basename}.parquet", run / f"{basename}.csv"
    for path, write in ((parquet, lambda p: frame.to_parquet(p, index=False)),
                        (csv, lambda p: frame.to_csv(p, index=False))):
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        write(tmp)
        os.replace(tmp, path)
    return parquet, csv


def _one_type_per_column(frame):
    """A column mixing types (a swept value of None, 2 and "auto") as text, which parquet accepts."""
    frame = frame.copy()
    for column in frame.columns:
        kinds = {type(v) for v in frame[column] if v is not None}
        if frame[column].dtype == object and len(kinds) > 1:
            frame[column] = frame[column].map(lambda v: None if v is None else str(v))
    return frame


def on_sweep_end(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> None:
    if not analysis.cells.empty:
        write_cells(run, analysis)
    if not analysis.fleet.empty:
        _write_both(Path(run), "fleet", _one_type_per_column(analysis.fleet))
