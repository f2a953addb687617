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

from pathlib import Path
from typing import Optional, Tuple

from sweeper.files import write_with

CELLS_BASENAME = "cells"


def write_cells(run: Path, analysis) -> Tuple[Path, Path]:
    """Writes cells.parquet and cells.csv, each atomically."""
    from sweeper.analysis.run import cell_summary

    return _write_both(Path(run), CELLS_BASENAME, _one_type_per_column(cell_summary(analysis)))


def _write_both(run: Path, basename: str, frame) -> Tuple[Path, Path]:
    return (write_with(run / f"{basename}.parquet", lambda tmp: frame.to_parquet(tmp, index=False)),
            write_with(run / f"{basename}.csv", lambda tmp: frame.to_csv(tmp, index=False)))


def _one_type_per_column(frame):
    """A column mixing types (a swept value of None, 2 and "auto") as text, which parquet accepts."""
    frame = frame.copy()
    for column in frame.columns:
        kinds = {type(v) for v in frame[column] if v is not None}
        if frame[column].dtype == object and len(kinds) > 1:
            frame[column] = frame[column].map(lambda v: None if v is None else str(v))
    return frame


def on_sweep_end(end) -> Optional[str]:
    """cells.* (and fleet.* on every_device runs) from the end's Analysis (a publishers.SweepEnd)."""
    if not end.analysis.cells.empty:
        write_cells(end.run, end.analysis)
    if not end.analysis.fleet.empty:
        _write_both(end.run, "fleet", _one_type_per_column(end.analysis.fleet))
    return None
