"""Weights & Biases: one W&B run per trial, and one summary run per sweep.

A trial's run: group = the sweep's run id, config = the trial's swept values,
cell, repeat and resources, history = its steps (steps.parquet), summary = its
p50/p95 and throughput. The summary run holds the analysis' per-cell table with
its verdicts (a wandb.Table: the same frame as cells.parquet), the recommendation
and the report's figures. Offline by default (`wandb.mode=offline`): runs land in
<run folder>/wandb/offline-run-* and `wandb sync` uploads them later.

wandb is imported once, lazily, here only; not installed means one warning line.
A W&B failure is logged by the sink guard and never fails the sweep. Credentials
stay in the environment (WANDB_API_KEY): nothing here copies the environment or
the root config into W&B, only the trial's own swept values and resources.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import Any, Dict, Optional

log = logging.getLogger(__name__)

_state: Dict[str, Any] = {"wandb": None, "warned": False}
# Per-step columns worth a W&B chart: times, items, memory, utilisation.
_STEP_PREFIXES = ("step_s", "host_step_s", "phase_", "items", "mem_", "gpu_", "util_")
_SUMMARY_KEYS = ("step_p50_s", "step_p95_s", "step_mean_s", "step_cv", "items_per_s", "steps")


def _settings(root: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    from sweeper.schema import WandbConfig

    cfg = {**dataclasses.asdict(WandbConfig()), **(root.get("wandb") or {})}
    return cfg if cfg["enabled"] and cfg["mode"] != "disabled" else None


def _import():
    """The wandb module, imported once; None (and one warning) when it is not installed."""
    if _state["wandb"] is None and not _state["warned"]:
        try:
            import wandb
        except ImportError:
            _state["warned"] = True
            log.warning("wandb is not installed: no W&B runs (pip install 'sweeper[wandb]', or wandb.enabled=false)")
            return None
        _state["wandb"] = wandb
    return _state["wandb"]


def _init(wandb, run: Path, cfg: Dict[str, Any], **kwargs):
    directory = Path(cfg["dir"]).expanduser() if cfg["dir"] else run   # W&B adds wandb/ itself
    directory.mkdir(parents=True, exist_ok=True)
    return wandb.init(project=cfg["project"], entity=cfg["entity"], dir=str(directory), mode=cfg["mode"],
                      reinit="finish_previous", settings=_quiet_settings(wandb), **kwargs)


def _quiet_settings(wandb):
    """No console capture, system stats, git or code saving: less per-trial cost, nothing private.
    Fields this wandb version lacks are left out."""
    wanted = {"silent": True, "console": "off", "x_disable_stats": True, "disable_git": True,
              "disable_code": True, "x_disable_machine_info": True, "save_code": False}
    known = getattr(wandb.Settings, "model_fields", None)
    return wandb.Settings(**{k: v for k, v in wanted.items() if known is None or k in known})


def trial_config(record: Dict[str, Any]) -> Dict[str, Any]:
    """What identifies a trial in W&B: swept values, cell, repeat, resources, machine."""
    fp = record.get("fingerprint") or {}
    config = {**record.get("swept", {}), "trial_id": record["trial_id"], "cell_id": record.get("cell_id"),
              "repeat": record.get("repeat", 0), "is_baseline": record.get("is_baseline", False),
              "sweep": record.get("sweep"), "resources": record.get("resources", {}),
              "overrides": " ".join(record.get("overrides", [])),
              "machine": {k: fp.get(k) for k in ("host", "cpu_model", "gpu_name", "torch", "cuda")}}
    return _redact(config)


def _redact(value: Dict[str, Any]) -> Dict[str, Any]:
    """Credential values from the environment replaced, should an override carry one."""
    try:
        from sweeper.redact import redact
    except ImportError:
        return value
    return redact(value)


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _log_steps(wb_run, steps_path: Path) -> None:
    import pandas as pd

    steps = pd.read_parquet(steps_path)
    columns = [c for c in steps.columns if c.startswith(_STEP_PREFIXES) or c == "warmup"]
    for row in steps[["step", *columns]].to_dict("records"):
        values = {k: v for k, v in row.items() if k != "step" and v is not None and _finite(v) is not None}
        wb_run.log(values, step=int(row["step"]))


def on_trial(run: Path, record: Dict[str, Any], root: Dict[str, Any]) -> None:
    """One W&B run for a finished (or failed) trial."""
    cfg = _settings(root)
    wandb = _import() if cfg else None
    if wandb is None:
        return
    wb_run = _init(wandb, run, cfg, group=record.get("run_id") or run.name, job_type="trial",
                   name=record["trial_id"], config=trial_config(record),
                   tags=["baseline"] if record.get("is_baseline") else None)
    try:
        steps = run / "trials" / record["trial_id"] / "steps.parquet"
        if cfg["log_steps"] and steps.exists():
            _log_steps(wb_run, steps)
        summary = record.get("summary") or {}
        wb_run.summary.update({"status": record["status"], "error_type": record.get("error_type"),
                               **{k: _finite(summary.get(k)) for k in _SUMMARY_KEYS}})
    finally:
        wb_run.finish(exit_code=0 if record["status"] == "ok" else 1)


def on_sweep_end(run: Path, data: Any, analysis: Any, root: Dict[str, Any]) -> None:
    """The summary run: the analysis' per-cell table (as cells.parquet holds it), the
    recommendation and the report's figures."""
    cfg = _settings(root)
    records = data.records
    wandb = _import() if cfg and records else None
    if wandb is None:
        return
    from sweeper.analysis.recommend import format_recommendation
    from sweeper.analysis.run import cell_summary
    from sweeper.report import FIGURES_DIR

    run_id = records[0].get("run_id") or run.name
    wb_run = _init(wandb, run, cfg, group=run_id, job_type="summary", name=f"{run_id}-summary",
                   config={"sweep": records[0].get("sweep"), "trials": len(records), "metric": analysis.metric,
                           "baseline_cell": analysis.baseline_id, "axes": analysis.axes,
                           "items_label": analysis.workload.items_label})
    try:
        table = cell_summary(analysis)
        table = table.astype(object).where(table.notna(), None)
        media: Dict[str, Any] = {"verdicts": wandb.Table(dataframe=table)}
        for png in sorted((run / FIGURES_DIR).glob("*.png")):
            media[f"figures/{png.stem}"] = wandb.Image(str(png))
        wb_run.log(media)
        wb_run.summary["recommendation"] = "\n".join(format_recommendation(analysis.recommendation))
        wb_run.summary["failed_trials"] = sum(1 for r in records if r.get("status") != "ok")
    finally:
        wb_run.finish()
