"""At the end of a sweep: the run appended to the history store, its alerts logged, written
beside the run (history_alerts.json, read by the W&B report) and, with W&B online, sent as a
W&B alert. Off with `history.enabled=false`.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

log = logging.getLogger(__name__)
ALERTS_FILE = "history_alerts.json"


def enabled(root: Dict[str, Any]) -> bool:
    return bool((root.get("history") or {}).get("enabled", True))


def on_sweep_end(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> None:
    if not enabled(root) or not data.records or analysis is None:
        return
    from sweeper import history
    from sweeper.history.store import rows_of_run
    from sweeper.results import write_bytes_atomic

    store = history.history_dir(root)
    rows = rows_of_run(run, data, analysis)
    done = history.store.append_rows(store, rows)       # a run with no ok trial is not appended
    payload = {"store": str(store), "line": done.line(), "alerts": [], "lines": [], "notes": []}
    if done.files:
        found = history.alerts(store, runs={rows["run_id"].iloc[0]}, settings=history.settings_of(root),
                               machine=rows["machine"].iloc[0], sweep=rows["sweep"].iloc[0])
        notes = [wandb_alert(found, root)] if found else []
        payload.update(alerts=[a.to_dict() for a in found], lines=[a.line() for a in found],
                       notes=[n for n in notes if n])
    write_bytes_atomic(Path(run) / ALERTS_FILE, json.dumps(payload, indent=1, default=str).encode())


def read_alerts(run: Path) -> Optional[Dict[str, Any]]:
    """What the sink wrote beside the run (store, alerts, their lines, notes), or None where it
    did not append the run (history off, no cells). The one reader of that file."""
    path = Path(run) / ALERTS_FILE
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    payload.setdefault("alerts", [])
    payload.setdefault("notes", [])
    if "lines" not in payload:          # written before the lines were
        from sweeper.history.detect import Alert

        payload["lines"] = [Alert(**a).line() for a in payload["alerts"]]
    return payload


def wandb_alert(found: List[Any], root: Dict[str, Any]) -> str:
    """A W&B alert for the regressions when W&B is online; otherwise the note that says it was skipped."""
    from sweeper.publishers import wandb_sink

    cfg = wandb_sink._settings(root)
    if cfg is None:
        return "W&B alert skipped: W&B is off (wandb.enabled=false or wandb.mode=disabled)"
    if cfg["mode"] != "online":
        return f"W&B alert skipped: wandb.mode={cfg['mode']} (an alert needs a live online run)"
    import wandb

    with wandb.init(project=cfg["project"], entity=cfg["entity"], job_type="history-alert",
                    dir=str(cfg.get("dir") or "."), reinit="create_new") as run:
        run.alert(title=f"sweeper: {len(found)} regression(s)", text="\n".join(a.line() for a in found),
                  level=wandb.AlertLevel.WARN)
    return ""
