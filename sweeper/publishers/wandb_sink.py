"""Weights & Biases: one W&B run per trial, and one summary run per sweep.

A trial's run: id = `run_id_for(sweep, run id, trial id)` (decided before the
trial's record is written, by `tracker`, so trial.json names it under
trackers.wandb), group = the sweep's run id, job_type = the workload's name, tags =
its cell id (and "baseline"), config = the same flat dotted keys as the summary
(swept values, cell_id, repeat, ...), history = its steps (steps.parquet), summary =
the figures the analysis gives that repeat (items_per_s, p50, p95, mean: computed
by the analysis' own `repeat_table` over the trial's measured steps, since the run
is made as the trial ends, before the analysis), its peak memory
(`trial_memory`), mean time per step in each phase and the probe's step figures. The summary run holds the analysis' per-cell table with
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
import hashlib
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, Optional

_state: Dict[str, Any] = {"wandb": None, "warned": False, "offline": False, "own_dirs": set()}
# W&B's own cache (its service's debug logs) and data folder (artifact staging) default to
# ~/.cache/wandb and ~/.local/share/wandb; a sweep keeps them beside its runs, where `wandb sync`
# finds them, unless the user chose a place.
_OWN_DIRS = (("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data"))
# The first online init gives up after this long (W&B's own default is 90 s, paid again by every
# trial when the server cannot be reached); then the rest of the sweep runs offline. W&B's own
# WANDB_INIT_TIMEOUT, where the user set it, is kept.
ONLINE_INIT_TIMEOUT_S = 15.0


def online_init_timeout_s() -> float:
    """WANDB_INIT_TIMEOUT where set, else 15 s; ConfigError for one that is no positive number of
    seconds: 0, a negative or nan left the sweep waiting forever on W&B's teardown (checked before
    a sweep starts: sweeper/preflight.py)."""
    from sweeper.errors import ConfigError

    text = os.environ.get("WANDB_INIT_TIMEOUT")
    if text is None:
        return ONLINE_INIT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"WANDB_INIT_TIMEOUT={text}: must be a positive number of seconds (how long W&B waits "
                          f"for its server); unset it for a wait of {ONLINE_INIT_TIMEOUT_S:g} s")
    return seconds
# Per-step columns worth a W&B chart: times, items, memory, utilisation.
_STEP_PREFIXES = ("step_s", "host_step_s", "phase_", "items", "mem_", "gpu_", "util_")
SUMMARY_NAME = "summary"          # the summary run's id is run_id_for(sweep, run id, SUMMARY_NAME)
SUMMARY_JOB_TYPE = "summary"      # its job_type; a trial's is its workload's name
VERDICTS_TABLE = "verdicts"       # the summary run's Table of the analysis' per-cell verdicts


def _settings(root: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    from sweeper.schema import WandbConfig

    cfg = {**dataclasses.asdict(WandbConfig()), **(root.get("wandb") or {})}
    if cfg["mode"] == "online" and _state.get("offline"):
        cfg["mode"] = "offline"          # the server did not answer earlier in this sweep
    return cfg if cfg["enabled"] and cfg["mode"] != "disabled" else None


def _import():
    """The wandb module, imported once; None (and one warning) when it is not installed."""
    if _state["wandb"] is None and not _state["warned"]:
        os.environ.setdefault("WANDB_SILENT", "true")   # its own console lines (a login note) stay off stderr
        try:
            import wandb
        except ImportError:
            _state["warned"] = True
            print("note: wandb is not installed: no W&B runs (pip install wandb, or wandb.enabled=false)",
                  file=sys.stderr, flush=True)
            return None
        _state["wandb"] = wandb
    return _state["wandb"]


def _init(wandb, run: Path, cfg: Dict[str, Any], **kwargs):
    directory = Path(cfg["dir"]).expanduser() if cfg["dir"] else run   # W&B adds wandb/ itself
    directory.mkdir(parents=True, exist_ok=True)
    _keep_own_files_in(directory / "wandb")
    mode = "offline" if _state.get("offline") else cfg["mode"]
    try:
        return _start(wandb, directory, cfg, mode, **kwargs)
    except Exception as exc:    # any online failure: the run is kept offline, for `wandb sync`
        if mode != "online":
            raise
        _fall_back(exc, directory)
        wandb.teardown()        # the failed run keeps its id in W&B's service: a fresh service frees it
        return _start(wandb, directory, cfg, "offline", **kwargs)


def _keep_own_files_in(folder: Path) -> None:
    own = _state.setdefault("own_dirs", set())
    for variable, name in _OWN_DIRS:
        if variable in own or not os.environ.get(variable):
            os.environ[variable] = str(folder / name)
            own.add(variable)


def _start(wandb, directory: Path, cfg: Dict[str, Any], mode: str, **kwargs):
    timeout = {"init_timeout": online_init_timeout_s()} if mode == "online" else {}
    return wandb.init(project=cfg["project"], entity=cfg["entity"], dir=str(directory), mode=mode,
                      reinit="finish_previous", settings=_quiet_settings(wandb, **timeout), **kwargs)


def _fall_back(exc: Exception, directory: Path) -> None:
    """Once per sweep: the rest of it runs offline (WANDB_MODE=offline), said in one line."""
    from sweeper.redact import redact_text

    _state["offline"] = True
    os.environ["WANDB_MODE"] = "offline"
    server = redact_text(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    print(f"W&B: {server} did not answer ({type(exc).__name__}); this sweep's W&B runs are kept offline: "
          f"wandb sync {directory / 'wandb'}/offline-run-* uploads them later", file=sys.stderr, flush=True)


def _quiet_settings(wandb, **more):
    """No console capture, system stats, git or code saving: less per-trial cost, nothing private.
    Fields this wandb version lacks are left out."""
    wanted = {"silent": True, "console": "off", "x_disable_stats": True, "disable_git": True,
              "disable_code": True, "x_disable_machine_info": True, "save_code": False, **more}
    known = getattr(wandb.Settings, "model_fields", None)
    return wandb.Settings(**{k: v for k, v in wanted.items() if known is None or k in known})


def run_id_for(sweep: Optional[str], run_id: str, name: str) -> str:
    """A W&B run id that is the same every time for one trial (or the summary run) of one sweep
    run: `<sweep>-<run id>-<trial id>`, made of [A-Za-z0-9_-] (W&B refuses :;,#?/' and the id is
    part of a URL), at most 64 characters (longer ones keep 51 and add a hash of the whole)."""
    text = re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(str(p) for p in (sweep, run_id, name) if p)).strip("-")
    if len(text) > 64:
        text = f"{text[:51]}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    return text


def _field(record: Any, name: str, default: Any = None) -> Any:
    return record.get(name, default) if isinstance(record, dict) else getattr(record, name, default)


def app_url() -> str:
    """The W&B web app's address for this environment (WANDB_BASE_URL / WANDB_APP_URL honoured)."""
    from urllib.parse import urlparse

    base = os.environ.get("WANDB_APP_URL") or os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
    base = base.rstrip("/")
    if os.environ.get("WANDB_APP_URL"):
        return base
    host = urlparse(base).netloc
    if host.startswith("api.wandb."):
        return base.replace("://api.", "://", 1)
    if host.startswith("api."):
        return base.replace("://api.", "://app.", 1)
    return base


def run_url(entity: Optional[str], project: str, wandb_id: str) -> Optional[str]:
    return f"{app_url()}/{entity}/{project}/runs/{wandb_id}" if entity else None


def tracker(run: Path, record: Any, root: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """sweeper.publishers.TRACKER_IDS["wandb"]: where W&B will hold this trial, before its
    record is written. The URL is known only online with an entity; offline it is None (and
    `python -m sweeper.publish` records the URLs once the runs are synced)."""
    cfg = _settings(root)
    if cfg is None:
        return None
    wandb_id = run_id_for(_field(record, "sweep"), _field(record, "run_id") or Path(run).name,
                          _field(record, "trial_id"))
    url = run_url(cfg["entity"], cfg["project"], wandb_id) if cfg["mode"] == "online" else None
    return {"run_id": wandb_id, "url": url}


# Row keys a W&B run holds elsewhere (its state, its summary) or that say nothing across runs.
_NOT_CONFIG = ("status", "error_type", "error_message", "pid", "started_at")


def trial_config(record: Dict[str, Any]) -> Dict[str, Any]:
    """What identifies a trial in W&B: the keys of its flat row that are not figures (swept
    values such as data.num_workers, trial_id, cell_id, repeat, is_baseline, workload,
    resources, overrides, host), its sweep and run id, and its machine."""
    from sweeper.record import flat_row, is_figure

    fp = record.get("fingerprint") or {}
    config = {k: v for k, v in flat_row(record).items() if k not in _NOT_CONFIG and not is_figure(k, record)}
    config.update({"sweep": record.get("sweep"), "run_id": record.get("run_id"),
                   "machine": {k: fp.get(k) for k in ("host", "cpu_model", "gpu_name", "torch", "cuda")}})
    return config        # from the record, redacted where it entered the driver


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _log_steps(wb_run, steps) -> None:
    columns = [c for c in steps.columns if c.startswith(_STEP_PREFIXES) or c == "warmup"]
    for row in steps[["step", *columns]].to_dict("records"):
        values = {k: v for k, v in row.items() if k != "step" and v is not None and _finite(v) is not None}
        wb_run.log(values, step=int(row["step"]))


def trial_figures(record: Dict[str, Any], steps: Optional[Any]) -> Dict[str, Any]:
    """The figures the analysis gives this trial as a repeat, by the analysis' own functions:
    items_per_s (its items / its time over its measured steps), p50, p95, mean step time and
    steps (`repeat_table`), peak gpu_mem_gb / host_mem_gb (`trial_memory`), and the mean
    seconds per measured step of each phase (phase_<name>_s, as the report's phase figure)."""
    import pandas as pd

    from sweeper.analysis.cells import trial_memory
    from sweeper.analysis.repeats import measured_steps, repeat_table
    from sweeper.record import flat_row

    if record.get("status") != "ok":
        return {}
    row = flat_row(record)
    steps = steps if steps is not None else pd.DataFrame()
    if not steps.empty and "trial_id" not in steps.columns:
        steps = steps.assign(trial_id=record["trial_id"])
    repeat = repeat_table(pd.DataFrame([row]), steps).to_dict("records")
    out: Dict[str, Any] = {k: repeat[0][k] for k in ("items_per_s", "p50", "p95", "mean", "steps")} if repeat else {}
    out.update(trial_memory(pd.Series(row), steps if not steps.empty else None))
    measured = measured_steps(steps)
    for column in (c for c in measured.columns if c.startswith("phase_") and c.endswith("_s")):
        out[column] = float(measured[column].fillna(0.0).mean())
    for key, value in (record.get("figures") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in out:
            out[key] = value
    return {k: _finite(float(v)) for k, v in out.items()}


def on_trial(run: Path, record: Dict[str, Any], root: Dict[str, Any]) -> None:
    """One W&B run for a finished (or failed) trial, under the id its record names."""
    cfg = _settings(root)
    wandb = _import() if cfg else None
    if wandb is None:
        return
    import pandas as pd

    from sweeper.record import PROBE_FIGURES

    run_id = record.get("run_id") or run.name
    wandb_id = ((record.get("trackers") or {}).get("wandb") or {}).get("run_id") \
        or run_id_for(record.get("sweep"), run_id, record["trial_id"])
    tags = [f"cell:{record.get('cell_id')}"] + (["baseline"] if record.get("is_baseline") else [])
    wb_run = _init(wandb, run, cfg, id=wandb_id, group=run_id,
                   job_type=(record.get("workload_spec") or {}).get("name") or "trial",
                   name=record["trial_id"], config=trial_config(record), tags=tags)
    try:
        path = run / "trials" / record["trial_id"] / "steps.parquet"
        steps = pd.read_parquet(path) if path.exists() else None
        if cfg["log_steps"] and steps is not None:
            _log_steps(wb_run, steps)
        summary = record.get("summary") or {}
        wb_run.summary.update({"status": record["status"], "error_type": record.get("error_type"),
                               **{k: _finite(summary.get(k)) for k in PROBE_FIGURES},
                               **trial_figures(record, steps)})
    finally:
        wb_run.finish(exit_code=0 if record["status"] == "ok" else 1)


def on_sweep_end(end) -> Optional[str]:
    """The summary run: the analysis' per-cell table (as cells.parquet holds it), the
    recommendation and the report's figures. `end`: a publishers.SweepEnd."""
    cfg = _settings(end.root)
    run, records, analysis = end.run, end.data.records, end.analysis
    wandb = _import() if cfg and records else None
    if wandb is None:
        return None
    from sweeper.analysis.recommend import recommendation_lines
    from sweeper.analysis.run import cell_summary
    from sweeper.report import FIGURES_DIR

    run_id = records[0].get("run_id") or run.name
    wb_run = _init(wandb, run, cfg, id=run_id_for(records[0].get("sweep"), run_id, SUMMARY_NAME),
                   group=run_id, job_type=SUMMARY_JOB_TYPE, name=f"{run_id}-summary",
                   config={"sweep": records[0].get("sweep"), "trials": len(records), "metric": analysis.metric,
                           "baseline_cell": analysis.baseline_id, "axes": analysis.axes,
                           "items_label": analysis.workload.items_label,
                           **({"compare_within": list(analysis.strata_keys), "baselines": dict(analysis.baselines)}
                              if analysis.strata_keys else {})})
    try:
        table = cell_summary(analysis)
        table = table.astype(object).where(table.notna(), None)
        media: Dict[str, Any] = {VERDICTS_TABLE: wandb.Table(dataframe=table)}
        for png in sorted((run / FIGURES_DIR).glob("*.png")):
            media[f"figures/{png.stem}"] = wandb.Image(str(png))
        wb_run.log(media)
        wb_run.summary["recommendation"] = "\n".join(recommendation_lines(analysis))
        wb_run.summary["failed_trials"] = sum(1 for r in records if r.get("status") != "ok")
    finally:
        wb_run.finish()
    return None


def alert(end) -> Optional[str]:
    """A W&B alert for the run's regressions across nights (end.history), when W&B is online;
    otherwise the note that says it was skipped (the morning report shows it)."""
    found = end.history.alerts if end.history is not None else ()
    if not found:
        return None
    cfg = _settings(end.root)
    if cfg is None:
        return "W&B alert skipped: W&B is off (wandb.enabled=false or wandb.mode=disabled)"
    if cfg["mode"] != "online":
        return f"W&B alert skipped: wandb.mode={cfg['mode']} (an alert needs a live online run)"
    wandb = _import()
    if wandb is None:
        return "W&B alert skipped: wandb is not installed"
    with wandb.init(project=cfg["project"], entity=cfg["entity"], job_type="history-alert",
                    dir=str(cfg.get("dir") or "."), reinit="create_new",
                    settings=_quiet_settings(wandb, init_timeout=online_init_timeout_s())) as run:
        run.alert(title=f"sweeper: {len(found)} regression(s)", text="\n".join(a.line() for a in found),
                  level=wandb.AlertLevel.WARN)
    return None
