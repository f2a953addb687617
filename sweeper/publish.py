"""Publish a run to W&B: sync its offline runs, save its report, record the URLs.

    python -m sweeper.publish results/<sweep>/<run>

1. checks that a W&B API key is set (WANDB_API_KEY, or a netrc entry for the W&B host,
   as `wandb login` writes) and that the W&B host answers: if not, one line on stderr,
   exit 3, and no file in the run folder is touched;
2. `wandb sync` of this sweep's offline runs (<run>/wandb/offline-run-*, or wandb.dir);
3. saves the report that the sweep wrote offline (wandb_report.json, wandb-workspaces'
   model) into the entity/project of its runs, onto the same report when published.json
   names one, so publishing again updates that report instead of adding a second;
4. writes published.json atomically (the report's id and URL, the summary run's and every
   trial run's id and URL) and prints the report's URL.

Exit codes: 0 published; 2 bad input (not a run folder, no wandb_report.json,
wandb-workspaces missing from the install); 3 not published: no key, W&B unreachable, or the sync or
the save failed (the line says which; the run folder's files are as they were, except the
`.synced` markers `wandb sync` leaves beside runs it uploaded).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import urlparse

from sweeper.files import write_json_atomic
from sweeper.publishers import wandb_sink
from sweeper.publishers.wandb_report import SPEC_FILE

PUBLISHED_FILE = "published.json"
OK, USAGE, NOT_PUBLISHED = 0, 2, 3
VIEWER = "query Viewer { viewer { id entity username } }"


class NotPublished(Exception):
    """One line saying why nothing was published; `unchanged`: no file of the run was touched."""

    def __init__(self, message: str, unchanged: bool = True):
        super().__init__(message)
        self.unchanged = unchanged


def base_url() -> str:
    return (os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").rstrip("/")


def api_key() -> Optional[str]:
    """WANDB_API_KEY, else the netrc entry for the W&B host (what `wandb login` writes)."""
    if os.environ.get("WANDB_API_KEY"):
        return os.environ["WANDB_API_KEY"]
    import netrc

    host = urlparse(base_url()).hostname or ""
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    try:
        found = netrc.netrc(path).authenticators(host)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return None
    return found[2] if found and found[2] else None


def reachable(timeout: float = 5.0) -> None:
    """A TCP connection to the W&B host, so that no network fails in seconds, not retries."""
    url = urlparse(base_url())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise NotPublished(f"W&B at {base_url()} is not reachable ({type(exc).__name__}: {exc})")


def _records(run: Path) -> List[Dict[str, Any]]:
    from sweeper.results import read_records

    return read_records(run)


def run_ids(run: Path, records: List[Dict[str, Any]]) -> Dict[str, str]:
    """trial id (and "summary") -> W&B run id: the record's trackers.wandb, else the same rule."""
    first = records[0]
    run_id = first.get("run_id") or run.name
    ids = {r["trial_id"]: ((r.get("trackers") or {}).get("wandb") or {}).get("run_id")
           or wandb_sink.run_id_for(r.get("sweep"), run_id, r["trial_id"]) for r in records}
    ids[wandb_sink.SUMMARY_NAME] = wandb_sink.run_id_for(first.get("sweep"), run_id, wandb_sink.SUMMARY_NAME)
    return ids


def offline_dirs(run: Path, ids: Dict[str, str]) -> List[Path]:
    """This sweep's offline run folders: <run>/wandb, or the run's wandb.dir (multirun.yaml)."""
    from sweeper.results import launch_config

    roots = [run / "wandb"]
    directory = (launch_config(run).get("wandb") or {}).get("dir")
    if directory:
        roots.append(Path(directory).expanduser() / "wandb")
    wanted = set(ids.values())
    found = {d for root in roots if root.is_dir() for d in root.glob("offline-run-*")
             if d.is_dir() and d.name.split("-", 3)[-1] in wanted}
    return sorted(found)


def sync_runs(dirs: List[Path], entity: str, project: str) -> None:
    """`wandb sync` the offline runs into entity/project (runs already synced are skipped)."""
    if not dirs:
        return
    cmd = [sys.executable, "-m", "wandb", "sync", "--entity", entity, "--project", project, *map(str, dirs)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()
        raise NotPublished(f"`wandb sync` failed ({tail[-1] if tail else f'exit {done.returncode}'})", unchanged=False)


def load_report(run: Path):
    """The report the sweep wrote (wandb_report.json), as wandb-workspaces' Report."""
    import wandb_workspaces.reports.v2 as wr
    from wandb_workspaces.reports.v2 import internal

    return wr.Report._from_model(internal.ReportViewspec.model_validate_json((run / SPEC_FILE).read_text()))


def runsets(blocks) -> list:
    import wandb_workspaces.reports.v2 as wr

    return [rs for b in blocks if isinstance(b, wr.PanelGrid) for rs in b.runsets]


def publish(run: Path) -> str:
    """Publishes the run; returns the report's URL. Raises NotPublished (nothing changed
    before the sync), or SystemExit(USAGE) on bad input."""
    if not (run / SPEC_FILE).is_file():
        print(f"error: {run} has no {SPEC_FILE}; give the run folder of a sweep that ran with wandb.enabled=true",
              file=sys.stderr)
        raise SystemExit(USAGE)
    try:
        from wandb_workspaces.reports.v2 import interface
    except ImportError:
        print("error: wandb-workspaces is not installed (pip install wandb-workspaces)", file=sys.stderr)
        raise SystemExit(USAGE)
    if not api_key():
        raise NotPublished("no W&B API key (set WANDB_API_KEY or run `wandb login`)")
    reachable()
    try:
        api = interface._get_api()
        viewer = (interface.execute_graphql(api, VIEWER) or {}).get("viewer") or {}
    except Exception as exc:
        raise NotPublished(f"W&B at {base_url()} refused or failed ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:200] if str(exc) else ''})")
    report = load_report(run)
    entity = report.entity or viewer.get("entity")
    if not entity:
        raise NotPublished("W&B named no default entity for this key; set wandb.entity")
    project = report.project
    records = _records(run)
    ids = run_ids(run, records)
    sync_runs(offline_dirs(run, ids), entity, project)

    report.entity = entity
    for runset in runsets(report.blocks):
        runset.entity, runset.project = entity, project
    previous = read_published(run)
    if previous.get("report", {}).get("id"):
        report.id = previous["report"]["id"]
    try:
        report.save()
        url = report.url
    except Exception as exc:
        raise NotPublished(f"saving the report failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})",
                           unchanged=False)

    write_json_atomic(run / PUBLISHED_FILE, {
        "report": {"id": report.id, "url": url, "entity": entity, "project": project, "title": report.title},
        "summary_run": {"run_id": ids[wandb_sink.SUMMARY_NAME],
                        "url": wandb_sink.run_url(entity, project, ids[wandb_sink.SUMMARY_NAME])},
        "trials": {trial: {"run_id": wid, "url": wandb_sink.run_url(entity, project, wid)}
                   for trial, wid in ids.items() if trial != wandb_sink.SUMMARY_NAME},
        "published_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })
    return url


def read_published(run: Path) -> Dict[str, Any]:
    path = run / PUBLISHED_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def main(argv: Optional[List[str]] = None) -> int:
    """The command behind the one error boundary (sweeper.cli): one line and exit 2 for bad input."""
    from sweeper import cli

    return cli.run(lambda: command(argv))


def command(argv: Optional[List[str]]) -> int:
    from sweeper.cli import Parser, path

    parser = Parser(prog="python -m sweeper.publish", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=path, help="a run folder: results/<sweep>/<run id>")
    args = parser.parse_args(argv)
    try:
        url = publish(args.run)
    except NotPublished as exc:
        where = "is unchanged" if exc.unchanged else f"has no new {PUBLISHED_FILE}"
        print(f"not published: {exc}; {args.run} {where}", file=sys.stderr)
        return NOT_PUBLISHED
    except SystemExit as exc:
        return int(exc.code or 0)
    print(url)
    return OK


if __name__ == "__main__":
    sys.exit(main())
