"""The report's figures: matplotlib (Agg, no pyplot state) rendered to PNG bytes.

Each function returns (png bytes or None, note); a figure that the run's data
cannot support (one swept axis, no memory figures) is skipped with a note saying why.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from sweeper.analysis.model import COLUMN, HIGHER_IS_BETTER, Analysis
from sweeper.analysis.repeats import measured_steps
from sweeper.analysis.text import num, rate_digits, value_text

Figure = Tuple[Optional[bytes], str]
BASELINE_COLOR, CELL_COLOR = "#d95f02", "#1b9e77"


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def keep_matplotlib_cache_with_the_shards() -> None:
    """matplotlib writes its font cache under HOME (~/.cache/matplotlib) unless MPLCONFIGDIR says
    otherwise; a sweep writes nothing outside results_dir and its own cache, so it goes there."""
    if not os.environ.get("MPLCONFIGDIR"):
        cache = Path(os.environ.get("SWEEPER_CACHE") or "~/.cache/sweeper/shards").expanduser()
        os.environ["MPLCONFIGDIR"] = str(cache / "matplotlib")


def _figure(width: float, height: float):
    keep_matplotlib_cache_with_the_shards()
    from matplotlib.figure import Figure as MplFigure

    return MplFigure(figsize=(width, height), layout="constrained")


def _ordered(analysis: Analysis) -> pd.DataFrame:
    """Cells in verdict-table order (baseline first, then fastest first)."""
    if analysis.verdicts.empty:
        return analysis.cells
    order = {c: i for i, c in enumerate(analysis.verdicts["cell_id"])}
    return analysis.cells.assign(_o=analysis.cells["cell_id"].map(order)).sort_values("_o").drop(columns="_o")


def step_distributions(steps: pd.DataFrame, analysis: Analysis) -> Figure:
    """Box plot of measured step times per cell, with each repeat's p50 as a dot."""
    if steps.empty or analysis.repeats.empty:
        return None, "no steps recorded: no step-time distributions"
    measured = measured_steps(steps)
    cells = _ordered(analysis)
    cells = cells[cells["repeats"] > 0]
    data, labels, colors = [], [], []
    for cell in cells.itertuples():
        trials = analysis.repeats.loc[analysis.repeats["cell_id"] == cell.cell_id, "trial_id"]
        data.append(measured.loc[measured["trial_id"].isin(trials), "step_s"].to_numpy(float) * 1e3)
        labels.append(cell.cell)
        colors.append(BASELINE_COLOR if analysis.is_baseline(cell.cell_id) else CELL_COLOR)
    fig = _figure(9, 1.2 + 0.45 * len(data))
    ax = fig.add_subplot()
    positions = np.arange(len(data))[::-1]
    parts = ax.boxplot(data, positions=positions, orientation="horizontal", widths=0.6, showfliers=True,
                       patch_artist=True, flierprops={"markersize": 2, "alpha": 0.4})
    for box, color in zip(parts["boxes"], colors):
        box.set(facecolor=color, alpha=0.35)
    for pos, cell in zip(positions, cells.itertuples()):
        p50 = analysis.repeats.loc[analysis.repeats["cell_id"] == cell.cell_id, "p50"].to_numpy(float) * 1e3
        ax.plot(p50, np.full(p50.size, pos), "k.", markersize=5, zorder=3)
    ax.set_yticks(positions, labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("step time, ms, log scale (box: pooled measured steps; dots: each repeat's p50)")
    ax.set_title("Step-time distribution per cell (baseline in orange)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig), ""


def heatmap_axes(analysis: Analysis, wanted: Sequence[str]) -> Tuple[List[str], str]:
    """The two axes of the heatmap: the configured ones, else the first two swept axes."""
    if wanted:
        missing = [a for a in wanted if a not in analysis.cells.columns]
        if missing:
            return [], f"analysis.heatmap names {missing}, which this run did not sweep: no heatmap"
        return list(wanted), ""
    varying = [a for a in analysis.axes if analysis.cells[a].astype(str).nunique() > 1]
    if len(varying) < 2:
        return [], "fewer than two swept axes: no heatmap"
    return varying[:2], ""


def heatmap(analysis: Analysis, wanted: Sequence[str] = ()) -> Figure:
    """Ratio to the baseline (chosen metric) over two axes; the best cell over any other axes."""
    axes, note = heatmap_axes(analysis, wanted)
    if not axes or analysis.verdicts.empty:
        return None, note or "no verdicts: no heatmap"
    m, higher = analysis.metric, analysis.metric in HIGHER_IS_BETTER
    table = analysis.cells.merge(analysis.verdicts[["cell_id", f"{m}_ratio"]], on="cell_id")
    x, y = axes
    table = table.assign(_x=table[x].map(value_text), _y=table[y].map(value_text))
    best = "max" if higher else "min"
    ratio = table.pivot_table(index="_y", columns="_x", values=f"{m}_ratio", aggfunc=best)
    value = table.pivot_table(index="_y", columns="_x", values=COLUMN[m], aggfunc=best)
    ratio = ratio.reindex(index=_sorted(ratio.index), columns=_sorted(ratio.columns))
    value = value.reindex(index=ratio.index, columns=ratio.columns)
    fig = _figure(1.6 + 1.2 * len(ratio.columns), 1.2 + 0.7 * len(ratio.index))
    ax = fig.add_subplot()
    spread = max(0.05, float(np.nanmax(np.abs(np.log(ratio.to_numpy(float))))))
    image = ax.imshow(np.log(ratio.to_numpy(float)), cmap="RdYlGn" if higher else "RdYlGn_r", vmin=-spread,
                      vmax=spread, aspect="auto")
    for (i, j), r in np.ndenumerate(ratio.to_numpy(float)):
        if np.isfinite(r):
            ax.text(j, i, f"{r:.2f}x\n{_value_text(value.iat[i, j], m, analysis)}", ha="center", va="center",
                    fontsize=8)
    ax.set_xticks(range(len(ratio.columns)), ratio.columns)
    ax.set_yticks(range(len(ratio.index)), ratio.index)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    others = [a for a in analysis.axes if a not in axes]
    what = f"{analysis.workload.items_label}/s" if higher else f"{m} step time"
    ax.set_title(f"{what} / baseline" + (" (best over other axes)" if others else ""), fontsize=9)
    fig.colorbar(image, ax=ax, label="log ratio (green: faster)")
    return _png(fig), ""


def _value_text(value: float, metric: str, analysis: Analysis) -> str:
    if metric in HIGHER_IS_BETTER:
        return f"{num(value, 1.0, rate_digits(value))} {analysis.workload.items_label}/s"
    return f"{num(value, 1e3, 2)} ms"


def _sorted(labels) -> List[str]:
    def key(label: str):
        try:
            return (0, float(label), label)
        except ValueError:
            return (1, 0.0, label)
    return sorted(labels, key=key)


def throughput_vs_memory(analysis: Analysis) -> Figure:
    """Items/s (with its interval) against the cell's peak memory: the memory the workload's
    spec names as its own (host memory for a loader, GPU memory for a training step)."""
    cells = analysis.cells[analysis.cells["repeats"] > 0]
    column = analysis.workload.memory
    if column not in cells or cells[column].isna().all():
        where = "GPU" if column == "gpu_mem_gb" else "host"
        return None, (f"no peak {where} memory recorded (the workload's own memory, {column}): "
                      "no throughput-memory plot")
    if "items_per_s" not in cells or cells["items_per_s"].isna().all():
        return None, "no throughput recorded (steps without items): no throughput-memory plot"
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    low = (cells["items_per_s"] - cells.get("items_per_s_low", cells["items_per_s"])).clip(lower=0)
    high = (cells.get("items_per_s_high", cells["items_per_s"]) - cells["items_per_s"]).clip(lower=0)
    colors = [BASELINE_COLOR if analysis.is_baseline(c) else CELL_COLOR for c in cells["cell_id"]]
    ax.errorbar(cells[column], cells["items_per_s"], yerr=[low.fillna(0), high.fillna(0)], fmt="none",
                ecolor="gray", alpha=0.6)
    ax.scatter(cells[column], cells["items_per_s"], c=colors, zorder=3)
    for row in cells.itertuples():
        ax.annotate(row.cell, (getattr(row, column), row.items_per_s), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    ax.set_xlabel("peak GPU memory, GB" if column == "gpu_mem_gb" else "peak host memory, GB")
    ax.set_ylabel(f"{analysis.workload.items_label}/s (median over repeats)")
    ax.set_title("Throughput against peak memory (up and to the left is better)")
    ax.grid(alpha=0.3)
    return _png(fig), ""


def phase_stack(means: pd.DataFrame) -> Figure:
    """Mean time per step in each phase, stacked, per cell."""
    if means.empty:
        return None, "no phases recorded: no phase breakdown"
    fig = _figure(9, 1.2 + 0.45 * len(means))
    ax = fig.add_subplot()
    positions = np.arange(len(means))[::-1]
    left = np.zeros(len(means))
    colors = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
    for i, phase in enumerate(means.columns):
        values = means[phase].to_numpy(float) * 1e3
        ax.barh(positions, values, left=left, label=phase, color=colors[i % len(colors)])
        left += values
    ax.set_yticks(positions, means.index, fontsize=8)
    ax.set_xlabel("mean time per measured step, ms")
    ax.set_title("Where a step's time goes, per cell")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig), ""
