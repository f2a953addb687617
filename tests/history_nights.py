"""Synthetic nights from a real run folder: copies of it with each repeat's step times scaled,
started a day apart, so the history sees a series of nights made of real result files."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import pandas as pd

DAY = 86400.0


def derive_night(real: Path, out: Path, night: int, scale: float, rng: np.random.Generator,
                 noise: float = 0.02, night_noise: float = 0.0, fingerprint: Optional[Dict] = None) -> Path:
    """A copy of `real` as night `night`: every repeat's step times x scale x the night's own
    drift (1 + N(0, night_noise)) x the repeat's (1 + N(0, noise)),
    its records started `night` days later, its fingerprint updated with `fingerprint`."""
    shutil.copytree(real, out)
    for stale in ("summary.parquet", "summary.csv", "cells.parquet", "cells.csv", "history_alerts.json"):
        (out / stale).unlink(missing_ok=True)          # rebuilt from the records
    run_id = out.name
    scale *= 1.0 + rng.normal(0.0, night_noise)
    for trial in sorted((out / "trials").iterdir()):
        factor = scale * (1.0 + rng.normal(0.0, noise))
        steps = pd.read_parquet(trial / "steps.parquet")
        for column in [c for c in ("step_s", "cycle_s") if c in steps.columns]:   # cycle_s: what items/s counts
            steps[column] = steps[column] * factor
        steps.to_parquet(trial / "steps.parquet", index=False)
        record = json.loads((trial / "trial.json").read_text())
        record["run_id"] = run_id
        record["started_at"] += night * DAY
        record["ended_at"] += night * DAY
        record["fingerprint"] = {**record["fingerprint"], **(fingerprint or {})}
        (trial / "trial.json").write_text(json.dumps(record))
    return out
