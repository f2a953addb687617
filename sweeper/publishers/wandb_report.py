"""A W&B Report per sweep, built by code with wandb-workspaces (pinned: its model is a preview).

At the end of a sweep (W&B enabled) this writes <run folder>/wandb_report.json: the report
as wandb-workspaces' own model (`internal.ReportViewspec`, the JSON `Report.save()` sends
but for what only the server knows), built offline. `python -m sweeper.publish RUN` loads
it back (`ReportViewspec.model_validate_json`, `wr.Report._from_model`), names each run
set's entity/project and saves it.

Why the run sets name no project in the file: serialising a run set that names one asks
the server for the project's internal id (one GraphQL call), which a sweep that runs
offline cannot make. A run set with no project serialises offline; publish sets every run
set's entity and project to the report's own (the project the sweep's runs were logged
to, `wandb.project`) before it saves, and the library then looks the id up.

What the report holds, all read from the run's one Analysis (never recomputed here):
the recommendation, the verdicts (the same markdown table as report.md) and what was
judged; the verdict table as a panel of the summary run's `verdicts` Table; throughput per
cell (bar, median over repeats: the analysis' cell figure), step time per step grouped by
cell (lines), a parallel-coordinates plot over the swept axes ending in throughput, the
mean time per step of each phase per cell, peak memory against throughput (scatter), and a
run comparer; and, when the history found any, the run's regressions across nights
(the alerts the sweep's end handed every view). The trial run set selects exactly this sweep's trial runs: W&B group = the
sweep's run id, config `sweep` = its name, job type = its workloads' names (the summary
run's job type is "summary"); cells are the config key `cell_id`.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Sequence

from sweeper.publishers import wandb_sink

SPEC_FILE = "wandb_report.json"
CELL_KEY = "cell_id"
WIDE = dict(w=12, h=8)

# Panel titles: tests and readers find the panels by them.
TITLES = {"throughput": "throughput per cell ({label}/s, median over repeats)",
          "steps": "step time per step, by cell (s)",
          "parallel": "swept axes -> throughput",
          "phases": "mean time per step in each phase, by cell (s)",
          "memory": "peak memory against throughput",
          "compare": "compare runs",
          "verdicts": "verdict table (summary run's Table)"}


def _quote(value: Any) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def trial_filter(run_id: str, sweep: Optional[str], workloads: List[str]) -> str:
    """The trial run set's filter: this run's group, this sweep, its workloads' job types."""
    parts = [f"Metric('Group') == {_quote(run_id)}"]
    if sweep:
        parts.append(f"Config('sweep') == {_quote(sweep)}")
    if len(workloads) == 1:
        parts.append(f"Metric('JobType') == {_quote(workloads[0])}")
    elif workloads:
        parts.append(f"Metric('JobType') in [{', '.join(_quote(w) for w in workloads)}]")
    return " and ".join(parts)


def summary_filter(run_id: str) -> str:
    return f"Metric('Group') == {_quote(run_id)} and Metric('JobType') == {_quote(wandb_sink.SUMMARY_JOB_TYPE)}"


def build_report(data: Any, analysis: Any, cfg: Dict[str, Any], alert_lines: Sequence[str] = ()):
    """The wr.Report of a run (offline: entity given, run sets with no project); `alert_lines`:
    the run's regressions across nights (sweeper.history.Recorded.lines)."""
    import wandb_workspaces.reports.v2 as wr

    from sweeper.analysis.recommend import recommendation_lines
    from sweeper.report import markdown, tables

    records = data.records
    first = records[0]
    run_id = first.get("run_id") or data.path.name
    sweep = first.get("sweep")
    workloads = sorted({(r.get("workload_spec") or {}).get("name") or "trial" for r in records})
    label = analysis.workload.items_label
    memory = analysis.workload.memory or "host_mem_gb"
    phases = sorted(c for c in (data.steps.columns if not data.steps.empty else [])
                    if c.startswith("phase_") and c.endswith("_s"))

    trials = wr.Runset(entity="", project="", name=f"trials of {run_id}",
                       filters=trial_filter(run_id, sweep, workloads))
    summary = wr.Runset(entity="", project="", name=f"summary of {run_id}", filters=summary_filter(run_id))
    cell = wr.Config(CELL_KEY)

    panels = [
        wr.BarPlot(title=TITLES["throughput"].format(label=label), metrics=[wr.SummaryMetric("items_per_s")],
                   groupby=cell, groupby_aggfunc="median", groupby_rangefunc="minmax", layout=wr.Layout(**WIDE)),
        wr.LinePlot(title=TITLES["steps"], x="Step", y=["step_s"], groupby=cell, groupby_aggfunc="mean",
                    groupby_rangefunc="minmax", layout=wr.Layout(**WIDE)),
        wr.ParallelCoordinatesPlot(title=TITLES["parallel"], layout=wr.Layout(w=24, h=8), columns=[
            *(wr.ParallelCoordinatesPlotColumn(wr.Config(axis), display_name=analysis.names.get(axis, axis))
              for axis in analysis.axes),
            wr.ParallelCoordinatesPlotColumn(wr.SummaryMetric("items_per_s"), display_name=f"{label}/s")]),
        wr.ScatterPlot(title=TITLES["memory"], x=wr.SummaryMetric(memory), y=wr.SummaryMetric("items_per_s"),
                       layout=wr.Layout(**WIDE)),
        wr.RunComparer(diff_only="split", layout=wr.Layout(**WIDE)),
    ]
    if phases:
        panels.insert(3, wr.BarPlot(title=TITLES["phases"], metrics=[wr.SummaryMetric(p) for p in phases],
                                    groupby=cell, groupby_aggfunc="mean", layout=wr.Layout(**WIDE)))

    verdicts = markdown.table(tables.verdicts(analysis))
    blocks = [
        wr.H1("Recommendation"),
        wr.MarkdownBlock("\n".join(f"- {line}" for line in recommendation_lines(analysis))),
        wr.H2(tables.verdicts_title(analysis)),
        wr.MarkdownBlock("\n".join([*verdicts, "", tables.judged(analysis), "", tables.noise_floor(analysis)])),
    ]
    if analysis.notes:
        blocks.append(wr.MarkdownBlock("\n".join(f"- {note}" for note in analysis.notes)))
    blocks += across_nights(wr, alert_lines)
    blocks += [
        wr.H2("Verdict table"),
        wr.PanelGrid(runsets=[summary], panels=[
            # default layout: 0.4.13 does not read a summary table's layout back, so publish would lose it
            wr.WeavePanelSummaryTable(table_name=wandb_sink.VERDICTS_TABLE)]),
        wr.H2("Trials"),
        wr.P(f"Every trial run of this sweep (group {run_id}), grouped by the config key {CELL_KEY}."
             + ("" if phases else " No phase was timed: no phase breakdown.")),
        wr.PanelGrid(runsets=[trials], panels=panels),
    ]
    title = f"{sweep or 'sweep'} {run_id}"[:128]
    return wr.Report(entity=cfg["entity"] or "", project=cfg["project"], title=title,
                     description=f"sweeper run {run_id}: {len(records)} trial(s), metric {analysis.metric}",
                     blocks=blocks)   # width: the default; 0.4.13 does not read it back (_from_model)


def across_nights(wr, found: Sequence[str]) -> list:
    """The run's regressions against earlier nights, if any."""
    if not found:
        return []
    lines = [f"- {line}" for line in found]
    return [wr.H2(f"Regressions across nights ({len(found)})"), wr.MarkdownBlock("\n".join(lines)),
            wr.P("python -m sweeper.history trend shows each cell over nights; the morning report has the plots.")]


def spec_json(report) -> str:
    """The report as wandb-workspaces' model JSON (what save() would send, offline)."""
    return report._to_model().model_dump_json(by_alias=True, exclude_none=True, indent=1)


def on_sweep_end(end) -> Optional[str]:
    """wandb_report.json in the run folder, when W&B is on; `python -m sweeper.publish` saves it.
    `end`: a publishers.SweepEnd."""
    cfg = wandb_sink._settings(end.root)
    if cfg is None or not end.data.records or end.analysis is None:
        return None
    try:
        import wandb_workspaces.reports.v2  # noqa: F401
    except ImportError:
        print("note: wandb-workspaces is not installed: no W&B report spec (pip install wandb-workspaces)",
              file=sys.stderr, flush=True)
        return None
    from sweeper.files import write_text_atomic

    write_text_atomic(end.run / SPEC_FILE, spec_json(build_report(end.data, end.analysis, cfg, end.alert_lines())))
    return None
