"""How the analysis' values read as text: setting names, cell labels and numbers.

One place for every view (terminal tables, report.md/html, W&B, Prometheus labels,
compare), so a cell reads the same everywhere. Plain Python: no pandas, no scipy.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Optional


def short_keys(keys: Iterable[str]) -> Dict[str, str]:
    """Each dotted key by its shortest dotted tail that no other key shares.

    ["data.num_workers"] -> num_workers; ["wandb.enabled", "report.enabled"] keep
    both prefixes, since "enabled" alone would name two settings."""
    keys = list(dict.fromkeys(str(k) for k in keys))
    parts = {k: k.split(".") for k in keys}
    out = {}
    for key in keys:
        for n in range(1, len(parts[key]) + 1):
            tail = parts[key][-n:]
            if all(parts[other][-n:] != tail for other in keys if other != key):
                break
        out[key] = ".".join(tail)
    return out


def value_text(value: Any) -> str:
    """A swept value as the views print it: 2.0 -> "2", None or NaN -> "-"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def same_value(actual: Any, wanted: str) -> bool:
    """Whether a swept value equals a `key=value` text (analysis.baseline) as typed values:
    1.0 matches "1" and "1.0", True matches "true"; other text compares case-insensitively."""
    a, w = _number(actual), _number(wanted)
    if a is not None and w is not None:
        return math.isclose(a, w, rel_tol=1e-12, abs_tol=0.0)
    text = "null" if actual is None or (isinstance(actual, float) and math.isnan(actual)) else str(actual)
    return text.strip().lower() == str(wanted).strip().lower()


def _number(value: Any) -> Optional[float]:
    """A number, never a bool (True is not "1"); numeric text counts, as Hydra types it."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return None if math.isnan(number) or str(value).strip().lower() in ("inf", "-inf", "infinity", "nan") else number


def cell_label(values: Dict[str, Any], names: Optional[Dict[str, str]] = None) -> str:
    """"num_workers=2 pin_memory=True": the cell's swept values under their short keys."""
    names = names or short_keys(values)
    return " ".join(f"{names.get(str(k), str(k))}={value_text(v)}" for k, v in values.items())


def num(value: Any, scale: float = 1.0, digits: int = 2) -> str:
    """1234.5 -> "1,234.50"; None, NaN and text that is no number -> "-"."""
    try:
        x = float(value) * scale
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(x) else f"{x:,.{digits}f}"


def rate_digits(value: Any) -> int:
    """Digits for a rate: 14,426 / 123.4 / 1.23 items/s (the value's own size decides)."""
    try:
        x = abs(float(value))
    except (TypeError, ValueError):
        return 0
    return 0 if not math.isfinite(x) or x >= 100 else (1 if x >= 10 else 2)


def interval(low: Any, high: Any, scale: float = 1.0, digits: int = 2) -> str:
    a, b = num(low, scale, digits), num(high, scale, digits)
    return "-" if "-" in (a, b) else f"[{a}, {b}]"


def pvalue(value: Any) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(x) else ("<0.001" if x < 0.001 else f"{x:.3f}")


def pct(value: Any) -> str:
    """0.123 -> "+12.3%"."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(x) else f"{x * 100:+.1f}%"


def text_table(header, rows, numeric=()) -> str:
    """Columns padded to their widest cell, numbers right-aligned: for terminals."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])
