"""Numeric drift: how far a trial's loss lands from the loss of its reference trial.

A bf16 trial is held against the fp32 trial with the same other settings and seed;
a ZeRO stage 1-3 trial against the stage-0 trial with the same other settings
(precision included). Both trained the same model on the same data from the same
weights for the same number of steps, so any difference in the loss after those
steps is arithmetic: rounding in bf16/fp16, or a different reduction order.

"The same other settings" are the row's config columns, which in a summary are the
dotted ones (`train.accum_steps`, `workload.seed`, ...), plus `repeat` when present.

Pure: pandas and numpy only.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np
import pandas as pd

# (name, column, the reference's value in that column)
REFERENCES: Tuple[Tuple[str, str, object], ...] = (
    ("fp32", "train.precision", "fp32"),
    ("stage0", "train.zero_stage", 0),
)


def setting_columns(frame: pd.DataFrame) -> list:
    return [c for c in frame.columns if "." in c or c == "repeat"]


def loss_drift(summary: pd.DataFrame, loss: str = "loss_final",
               references: Sequence[Tuple[str, str, object]] = REFERENCES,
               settings: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """One row per summary row (same index): trial_id, and for each reference NAME
    `drift_NAME_ref` (its trial id), `drift_NAME_ref_loss`, `drift_NAME_abs` = |loss - ref|,
    `drift_NAME_rel` = |loss - ref| / |ref|. NaN where the row or its reference did not
    finish, has no finite loss, or the sweep has no such column; a reference row gets 0."""
    settings = list(settings) if settings is not None else setting_columns(summary)
    out = pd.DataFrame({"trial_id": summary.get("trial_id")}, index=summary.index)
    for name, column, value in references:
        out = out.join(_against(summary, loss, name, column, value, settings))
    return out


def _against(frame: pd.DataFrame, loss: str, name: str, column: str, value, settings) -> pd.DataFrame:
    cols = {f"drift_{name}_ref": None, f"drift_{name}_ref_loss": np.nan,
            f"drift_{name}_abs": np.nan, f"drift_{name}_rel": np.nan}
    result = pd.DataFrame({k: [v] * len(frame) for k, v in cols.items()}, index=frame.index)
    if column not in frame.columns or loss not in frame.columns:
        return result
    keys = [c for c in settings if c != column and c in frame.columns]
    usable = _usable(frame, loss)
    refs = {}
    for index in frame.index[usable & (frame[column].map(_text) == _text(value))]:
        refs.setdefault(_key(frame, index, keys), index)
    for index in frame.index[usable]:
        ref = refs.get(_key(frame, index, keys))
        if ref is None:
            continue
        mine, theirs = float(frame.at[index, loss]), float(frame.at[ref, loss])
        result.loc[index] = [frame.at[ref, "trial_id"] if "trial_id" in frame.columns else ref, theirs,
                             abs(mine - theirs), abs(mine - theirs) / abs(theirs) if theirs else np.nan]
    return result


def _usable(frame: pd.DataFrame, loss: str) -> pd.Series:
    finite = pd.to_numeric(frame[loss], errors="coerce").map(lambda v: bool(np.isfinite(v)))
    if "status" in frame.columns:
        return finite & (frame["status"] == "ok")
    return finite


def _key(frame: pd.DataFrame, index, keys) -> tuple:
    return tuple(_text(frame.at[index, k]) for k in keys)


def _text(value) -> str:
    """Compares 0 with "0" and 2.0 with 2: summaries turn mixed columns into text."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "None"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    return str(value).lower()
