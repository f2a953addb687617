"""A sparkline: a series as a small inline SVG (no script, no external file, no plotting
library), for a table a reviewer scans in a glance, such as the morning report's one row per cell.

The y axis starts at zero, as the full-size trend plots do: a night's noise looks as small as it
is, and a 30% drop looks like 30%. Marked points (alerted nights) are red; the last point is a dot.
"""
from __future__ import annotations

import math
from html import escape
from typing import List, Optional, Sequence, Tuple

LINE, MARK, LAST = "#1b9e77", "#d7301f", "#333"


def _points(values: Sequence[float], width: float, height: float, pad: float) -> List[Optional[Tuple[float, float]]]:
    """(x, y) in the box for each finite value, None for a missing one; y from zero to the largest."""
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    top = max(finite, default=0.0) or 1.0
    step = (width - 2 * pad) / max(len(values) - 1, 1)
    return [(pad + i * step, height - pad - (height - 2 * pad) * max(v, 0.0) / top)
            if isinstance(v, (int, float)) and math.isfinite(v) else None for i, v in enumerate(values)]


def _dot(point: Tuple[float, float], colour: str, radius: float) -> str:
    return f'<circle cx="{point[0]:.1f}" cy="{point[1]:.1f}" r="{radius:g}" fill="{colour}"/>'


def sparkline(values: Sequence[float], marked: Sequence[int] = (), title: str = "",
              width: int = 120, height: int = 28) -> str:
    """The series as one <svg> element; `marked`: indexes drawn red; `title`: its tooltip and label."""
    pad = 3.0
    points = _points(values, width, height, pad)
    drawn = [p for p in points if p is not None]
    parts = [f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>"]
    if len(drawn) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in drawn)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{LINE}" stroke-width="1.5"/>')
    if drawn:
        parts.append(_dot(drawn[-1], LAST, 2))
    parts += [_dot(points[i], MARK, 2.5) for i in marked if 0 <= i < len(points) and points[i] is not None]
    return "".join(parts + ["</svg>"])
