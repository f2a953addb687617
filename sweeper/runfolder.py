"""The run folder: where a sweep's results go, a new one or an earlier one to resume.

Every path here stays inside results_dir (resolved, links followed): `sweep.name` and
`run_id` name folders below it, and `resume=` takes `latest`, a run id of the sweep, or a
run folder under results_dir. A new run folder is created with an exclusive mkdir, so two
sweeps started in the same second never share one: the second takes a suffix (-2, -3 ...).
It is created only once trials will run; bad input and dry runs leave nothing behind.
Nothing is deleted that this tool did not create: resuming removes only the half-written
trial folders that results.write_trial names as its own (.staging-*, .old-*).
A sweep holds its run folder while it writes it (`writing`: an flock on the folder itself), so a
resume of a run that another sweep is still writing is refused before anything starts. A resume
adds trials of the run's own cells only (`check_same_cells`).
"""
from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from sweeper import exitcodes
from sweeper.errors import ConfigError, SweeperError
from sweeper.plan import Trial
from sweeper.record import TrialRecord
from sweeper.files import write_bytes_atomic
from sweeper.folderlock import BUSY, holder, lock_folder
from sweeper.results import LEFTOVER_PREFIXES, MULTIRUN_FILE, TRIAL_DIRS, read_records, run_dir
from sweeper.schema import RootConfig

MAX_SUFFIX = 1000      # run ids taken at once in one second: far more than a machine starts


def results_root(root: RootConfig) -> Path:
    return Path(root.results_dir).expanduser().resolve()


def contained(path: Path, results: Path, key: str) -> Path:
    """`path` resolved; a ConfigError naming `key` when it leaves results_dir."""
    resolved = path.expanduser().resolve()
    if resolved == results or not resolved.is_relative_to(results):
        raise ConfigError(f"{key}: {resolved} is not inside results_dir ({results}); "
                          f"give a plain name (letters, digits, '-', '_', '.'), not a path")
    return resolved


def planned_run(root: RootConfig) -> Path:
    """Where a new run would go (nothing is created): results_dir/<sweep.name>/<run_id>."""
    results = results_root(root)
    contained(results / root.sweep.name, results, "sweep.name")
    return contained(run_dir(str(results), root.sweep.name, root.run_id), results, "run_id")


def check_results_dir(root: RootConfig) -> None:
    """results_dir is, or can become, a folder this user writes. Permissions do not say it for
    root or a read-only mount (/proc), so a folder is made there and removed at once."""
    from sweeper.preflight import folder_problem

    results = results_root(root)
    problem = folder_problem(results)
    if problem:
        raise ConfigError(f"results_dir: {problem}; set results_dir= to a folder you can write")


@dataclass(frozen=True)
class NewRun:
    path: Path
    made: Tuple[Path, ...]       # the folders this run created, the run folder first


def new_run(root: RootConfig, multirun: Optional[str] = None) -> NewRun:
    """Creates the run folder atomically; takes a suffix when its name is taken (root.run_id
    follows). Writes multirun.yaml (what Hydra launched) into it."""
    planned = planned_run(root)
    above = _missing(planned.parent)
    try:
        planned.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"results_dir: cannot create {planned.parent} ({exc.strerror}); "
                          f"set results_dir= to a folder you can write") from None
    for n in range(1, MAX_SUFFIX):
        name = root.run_id if n == 1 else f"{root.run_id}-{n}"
        run = contained(planned.parent / name, results_root(root), "run_id")
        try:
            run.mkdir()
        except FileExistsError:
            continue
        root.run_id = name
        if multirun is not None:
            write_bytes_atomic(run / MULTIRUN_FILE, multirun.encode())
        return NewRun(run, (run, *above))
    raise SweeperError(f"run_id: {planned} and {MAX_SUFFIX} suffixed names are taken; give another run_id")


def _missing(folder: Path) -> List[Path]:
    """`folder` and those above it that do not exist yet, innermost first."""
    out = []
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def drop_new_run(new: Optional[NewRun]) -> None:
    """Removes what a new run created when no trial got into it (its run folder holds only
    multirun.yaml), and the folders above it that it created, if nothing else is in them."""
    if new is None or not new.path.is_dir():
        return
    trials = new.path / TRIAL_DIRS
    if not {p.name for p in new.path.iterdir()} <= {MULTIRUN_FILE, TRIAL_DIRS} or \
            (trials.is_dir() and any(trials.iterdir())):
        return
    shutil.rmtree(new.path, ignore_errors=True)
    for folder in new.made[1:]:
        try:
            folder.rmdir()            # only an empty one: another sweep may have started inside meanwhile
        except OSError:
            return


def resumed_run(root: RootConfig) -> Path:
    """The earlier run that `resume=` names: latest, a run id of this sweep, or a run folder
    inside results_dir. It keeps its run id."""
    results = results_root(root)
    runs = contained(results / root.sweep.name, results, "sweep.name")
    if root.resume == "latest":
        earlier = holding(runs, TRIAL_DIRS)
        if not earlier:
            raise ConfigError(f"resume=latest: no earlier run of sweep '{root.sweep.name}' under {runs}; "
                              f"start a new run without resume")
        run = earlier[-1].resolve()
    else:
        run = _named_run(root.resume, runs, results)
    if not (run / TRIAL_DIRS).is_dir():
        raise ConfigError(f"resume: no run folder with trials at {run}; give latest, a run id under {runs}, "
                          f"or a run folder inside results_dir")
    contained(run / TRIAL_DIRS, results, "resume")
    read_records(run)             # a damaged trial.json is named now, before anything starts
    check_free(run)
    root.run_id = run.name
    return run


class RunBusy(SweeperError):
    """Another process is writing the run folder (exit code exitcodes.LOCKED: try again later)."""
    code = exitcodes.LOCKED


@contextmanager
def writing(run: Path) -> Iterator[None]:
    """Holds `run` while this sweep writes it: an exclusive flock on the folder itself, so
    nothing is written into it and the kernel lets go when the process ends, however it ends.
    RunBusy when another process holds it (a sweep still running, an overnight suite's sweep
    that outlived its suite). A filesystem without flock holds nothing, as before."""
    fd, state = lock_folder(run)
    try:
        if state == BUSY:
            raise RunBusy(f"resume: {run} is being written by another sweep ({holder(fd)}); wait for it to end "
                          f"or stop it, then resume")
        yield
    finally:
        os.close(fd)


def check_free(run: Path) -> None:
    """RunBusy now, before anything starts, when another process is writing `run`."""
    with writing(run):
        pass


def holding(parent: Path, name: str, folder: bool = True) -> List[Path]:
    """The folders under `parent` that hold the folder `name` (a run's trials/) or, `folder=False`,
    the file (a night's night.json), in the order their ids were taken (the last is the latest)."""
    found = [p for p in parent.iterdir() if p.is_dir() and ((p / name).is_dir() if folder else (p / name).is_file())] \
        if parent.is_dir() else []
    return sorted(found, key=_in_order)


def _in_order(run: Path) -> list:
    """Run ids in the order they were taken: by name, numbers as numbers (20261201-171007-10
    after 20261201-171007-2, which follows 20261201-171007)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", run.name)]


def _named_run(resume: str, runs: Path, results: Path) -> Path:
    """A run id (a plain name) under this sweep's folder, or a path that must stay in results_dir."""
    if "/" not in resume and resume not in (".", "..", "~"):
        return contained(runs / resume, results, "resume")
    path = Path(resume).expanduser()
    resolved = path.resolve()
    if resolved == results or not resolved.is_relative_to(results):
        raise ConfigError(f"resume: {resolved} is not inside results_dir ({results}); give latest, a run id "
                          f"of sweep '{runs.name}', or a run folder under results_dir")
    return resolved


def is_own_leftover(path: Path) -> bool:
    """A half-written trial folder that results.write_trial made (its own prefixes), not a link."""
    return path.name.startswith(LEFTOVER_PREFIXES) and path.is_dir() and not path.is_symlink()


def earlier_results(run: Path, trials: List[Trial], any_repeat: bool = False) -> Dict[str, TrialRecord]:
    """Finished trials of this grid from an earlier attempt at the run; this tool's own
    half-written folders are removed so those trials run again. Nothing else is touched.
    `any_repeat` (repeats=auto): every finished repeat of the grid's cells, the later rounds'
    too, so that the rounds go on from where the run stopped instead of running them again."""
    for leftover in (run / TRIAL_DIRS).iterdir():
        if is_own_leftover(leftover):
            shutil.rmtree(leftover, ignore_errors=True)
    wanted, cells = {t.trial_id for t in trials}, {t.cell_id for t in trials}
    return {r["trial_id"]: TrialRecord.from_dict(r) for r in read_records(run)
            if r["status"] == "ok" and (r["trial_id"] in wanted or (any_repeat and r.get("cell_id") in cells))}


def check_same_cells(run: Path, trials: List[Trial]) -> None:
    """ConfigError, before anything starts, when a trial of the resumed `run` measured a cell that
    this command does not plan (another workload.steps, a narrower grid): its trials would run as
    new cells beside the old ones, two configurations in one analysis. A cell that this command
    adds (a wider grid, more repeats) is the run's to grow; a retry that shrank its trial
    (resources.on_oom=halve) is its original's."""
    planned = {t.cell_id for t in trials}
    records = read_records(run)
    strays = [r for r in records if r.get("cell_id") not in planned and not r.get("retry_of")]
    if not strays:
        return
    difference = nearest_difference(strays[0], trials)
    if not difference:           # the same settings under another cell id: another rule wrote the run
        raise ConfigError(f"resume: the trials in {run} name their cells by another rule (an older sweeper, or "
                          f"another workload wrote the run); start a new run without resume")
    changes = "; ".join(f"{key} {there} there, {here} here" for key, (there, here) in list(difference.items())[:3])
    raise ConfigError(f"resume: {len(strays)} of the {len(records)} trials in {run} measured settings that this "
                      f"command does not plan ({changes}); resume with the run's own overrides (its "
                      f"{MULTIRUN_FILE}), or start a new run without resume")


def nearest_difference(record: dict, trials: List[Trial]) -> Dict[str, list]:
    """{measurement key: [the record's value, the planned value]} against the planned trial that
    differs from `record` in the fewest measurement settings (sweeper/compare.py says which differ)."""
    from sweeper.compare import settings_differ
    from sweeper.results import flatten
    from sweeper.schema.roles import is_measurement
    from sweeper.schema.root import trial_dict

    there = flatten(record.get("config") or {})
    cells = {t.cell_id: t for t in trials}.values()          # repeats of a cell have one config
    differences = [{k: v for k, v in settings_differ(there, flatten(trial_dict(t.config))).items() if is_measurement(k)}
                   for t in cells]
    return min(differences, key=len, default={})
