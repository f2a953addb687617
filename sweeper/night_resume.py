"""Finishing a night that was cut short: `python -m sweeper +sweep=overnight resume=latest`
(or `resume=<stamp>`). The suite (sweeper/overnight.py) runs what this module decides.

Which night: `latest`, or a night's stamp (a folder name under results_dir/overnight/, not a
path), and only a folder this tool wrote as a night (it holds night.json of this suite).
What each of its sweeps does, read from night.json and the run folders present:
- kept: its last status says it finished (`ok` or `failed trials`: every trial ran, failed
  ones are rows) and the deadline skipped none of its trials;
- resumed with the sweep's own resume (only its missing trials run): anything else whose run
  folder holds trials (interrupted, node lost, disk full, still `running` in the manifest of a
  suite that was killed, no entry at all, or trials the deadline skipped);
- fresh: never started (no run folder with trials; a folder its killed start left empty goes).
Everything here but `clear_empty_run` reads only.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from sweeper.errors import ConfigError
from sweeper.results import TRIAL_DIRS, read_records
from sweeper.runfolder import NewRun, check_free, contained, drop_new_run, holding, results_root

NIGHT_FILE = "night.json"
FINISHED = ("ok", "failed trials")       # every trial ran: a failed trial is a row, not a missing one
KEEP, RESUME, FRESH = "kept", "resumed", "fresh"


@dataclass(frozen=True)
class Step:
    """What one sweep of a night does: KEEP (its night.json entry stands), RESUME, FRESH."""
    name: str
    action: str
    entry: Optional[Dict[str, Any]] = None    # its last night.json entry, if any
    why: str = ""                             # the status that decided, as the dry run says it


# -- which night --------------------------------------------------------------------------
def find_night(nights: Path, resume: str, results: Path) -> Path:
    """The night folder `resume=` names under `nights` (results_dir/overnight); a ConfigError
    in one line when there is none, it is a path, or the folder is not a night."""
    if resume == "latest":
        found = holding(nights, NIGHT_FILE, folder=False)
        if not found:
            raise ConfigError(f"resume=latest: no night to resume under {nights} (no folder with {NIGHT_FILE}); "
                              f"start a night without resume")
        return found[-1].resolve()
    if "/" in resume or resume in (".", "..", "~") or resume.startswith("~"):
        raise ConfigError(f"resume={resume}: give latest or a night's stamp (a folder name under {nights}), "
                          f"not a path")
    night = contained(nights / resume, results, "resume")
    if not (night / NIGHT_FILE).is_file():
        known = ", ".join(p.name for p in holding(nights, NIGHT_FILE, folder=False)[-3:]) or "none"
        raise ConfigError(f"resume={resume}: {nights / resume} is not a night of the suite (no {NIGHT_FILE} in it); "
                          f"give latest or a night's stamp (latest ones: {known})")
    return night


def read_night(night: Path, suite: str) -> Dict[str, Any]:
    """night.json of `night`, checked to be a manifest of the suite named `suite`."""
    path = night / NIGHT_FILE
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"resume: {path} cannot be read ({exc}); give another night's stamp") from None
    if not isinstance(manifest, dict) or manifest.get("suite") != suite or \
            not isinstance(manifest.get("sweeps_planned"), list) or not isinstance(manifest.get("sweeps"), list):
        raise ConfigError(f"resume: {path} is not a manifest of suite '{suite}'; give a night of this suite")
    return manifest


# -- what each sweep does ------------------------------------------------------------------
def step_of(name: str, entry: Optional[Dict[str, Any]], has_trials: bool) -> Step:
    """The decision for one sweep, from its last night.json entry and whether its run folder holds trials."""
    status = entry["status"] if entry else "no entry"
    if entry and status in FINISHED and not entry.get("skipped_trials"):
        return Step(name, KEEP, entry, status)
    if entry and status in FINISHED:
        status = f"{status}, {len(entry['skipped_trials'])} trial(s) not started"
    return Step(name, RESUME if has_trials else FRESH, entry, status)


def plan_resume(manifest: Dict[str, Any], night: Path) -> List[Step]:
    """One Step per sweep the night planned, in its order."""
    last = {entry["name"]: entry for entry in manifest["sweeps"]}
    stamp = night.name
    return [step_of(name, last.get(name), (night / name / stamp / TRIAL_DIRS).is_dir())
            for name in manifest["sweeps_planned"]]


def resume_args(step: Step, stamp: str) -> List[str]:
    """What a sweep's command gains: the sweep's own resume of its run folder in the night."""
    return [f"resume={stamp}"] if step.action == RESUME else []


def clear_empty_run(run: Path) -> None:
    """A run folder that a killed start left with no trial (only multirun.yaml): removed, so a
    fresh start of the sweep gets the night's stamp as its run id again, not a suffixed one."""
    drop_new_run(NewRun(run, (run,)))


def resumed_manifest(old: Dict[str, Any], resume: Dict[str, Any], deadline: Optional[float]) -> Dict[str, Any]:
    """The night's manifest as a resume starts: its stamp, start, host and command kept; the
    sweeps' entries filled again in order as each is kept or run; `resume` (at, host, pid,
    command, budget_s) appended to `resumed`; the deadline is the resume's."""
    manifest = {**old, "sweeps": [], "ended_at": None, "exit_code": None, "deadline": deadline, "alerts": []}
    manifest.pop("alerts_error", None)
    manifest["resumed"] = list(old.get("resumed") or []) + [resume]
    return manifest


# -- the suite's calls -------------------------------------------------------------------------
def night_named(root) -> Path:
    """The night folder the suite's resume= names under results_dir/<suite>; its stamp becomes the run id."""
    results = results_root(root)
    night = find_night(contained(results / root.sweep.name, results, "sweep.name"), str(root.resume), results)
    root.run_id = night.name
    return night


def steps_of(root, night: Optional[Path]):
    """What each sweep does (Steps) and the manifest of the night resumed (None for a new night):
    a resumed night runs the sweeps it planned, whatever overnight.sweeps says now."""
    if night is None:
        return [Step(name, FRESH, why="new night") for name in root.overnight.sweeps], None
    old = read_night(night, root.sweep.name)
    if list(root.overnight.sweeps) != old["sweeps_planned"]:
        print(f"note: night {night.name} planned {', '.join(old['sweeps_planned'])}: those are finished, "
              f"not overnight.sweeps", file=sys.stderr, flush=True)
    root.overnight.sweeps = list(old["sweeps_planned"])
    for name in old["sweeps_planned"]:            # a sweep of the night still running: RunBusy, before anything
        if (night / name / night.name).is_dir():
            check_free(night / name / night.name)
    return plan_resume(old, night), old


def dry_run_heading(night: Path, root, steps: List[Step], outputs) -> str:
    """A resumed night's dry run: what it would run, sweep by sweep (`outputs`: (Step, planned trial ids, text))."""
    counts = {s.name: (len(ids), missing(night / s.name / root.run_id, ids)) for s, ids, _ in outputs}
    lines = [step_line(s, *counts.get(s.name, (None, None))) for s in steps]
    return "\n".join([f"dry run: {sum(n for _, n in counts.values())} trial(s) to run, nothing launched, no lock "
                      f"taken; {heading(night, root.overnight.budget_s)}", *lines])


# -- what a dry run or a start says ----------------------------------------------------------
def planned_ids(dry_run_output: str) -> List[str]:
    """The trial ids a sweep's dry run lists (its lines that start with two spaces)."""
    return [line.split()[0] for line in dry_run_output.splitlines() if line.startswith("  ") and line.strip()]


def missing(run: Path, trial_ids: List[str]) -> int:
    """How many of `trial_ids` have no record that finished ok in `run`: what a resume runs."""
    done = {r["trial_id"] for r in read_records(run) if r.get("status") == "ok"}
    return sum(t not in done for t in trial_ids)


def step_line(step: Step, planned: Optional[int] = None, to_run: Optional[int] = None) -> str:
    """One sweep's line: what a resume does with it (the counts where a dry run knows them)."""
    if step.action == KEEP:
        return f"  {step.name}: kept ({step.why}), not run again"
    if step.action == RESUME:
        counts = f"{to_run} of {planned} planned trial(s) missing" if planned is not None else "its missing trials"
        return f"  {step.name}: resumed ({step.why}): {counts} run"
    counts = f": {planned} trial(s)" if planned is not None else ""
    return f"  {step.name}: starts fresh ({step.why}){counts}"


def heading(night: Path, budget_s: Optional[float]) -> str:
    """What a resume says first: the night, and its budget (counted again from the resume)."""
    budget = f"budget {budget_s:g} s from now" if budget_s else "no budget"
    return f"resuming night {night.name} ({night}); {budget}"


def nothing_left(night: Path, steps: List[Step]) -> Optional[str]:
    """The line for a night whose every sweep finished, else None."""
    if any(s.action != KEEP for s in steps):
        return None
    kept = ", ".join(f"{s.name} {s.why}" for s in steps)
    return f"resume: every sweep of night {night.name} finished ({kept}); nothing to run"
