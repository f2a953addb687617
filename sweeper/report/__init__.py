"""Reports of one run folder: report.html (self-contained) and report.md, views of its Analysis.

    from sweeper.analysis.run import analyze_run, run_analysis_config
    from sweeper.report import write_report
    data, analysis = analyze_run(run, run_analysis_config(run))
    html_path, md_path = write_report(run, data, analysis)

Or from a shell: `python -m sweeper.report RUN_DIR [--metric p95] [--baseline "data.num_workers=0"]`.
The analysis settings come from the argument, else the run's own multirun.yaml
(its `analysis:` section), else the defaults.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple


FIGURES_DIR = "report_figures"


@dataclass
class FigureOut:
    name: str
    title: str
    png: Optional[bytes]
    note: str

    @property
    def file(self) -> str:
        return f"{FIGURES_DIR}/{self.name}.png"


@dataclass
class Report:
    title: str
    facts: List[str]
    verdicts: Any
    noise_floor: str
    recommendation: List[str]
    notes: List[str]
    statistics: Any
    failures: Any
    figures: List[FigureOut]
    pitfalls: List[str] = field(default_factory=list)   # tables.pitfall_lines
    overlap: Any = ([], [])                              # tables.overlap_table
    scaling: Any = ([], [])                              # tables.scaling_table
    fleet: Any = None            # (header, rows): each device against its peers; no rows: not a fleet run
    verdicts_title: str = "Verdicts against the baseline"   # tables.verdicts_title: with strata, each one's
    regressions: List[str] = field(default_factory=list)   # the run's alerts across nights (sweeper.history)
    pairs: List[str] = field(default_factory=list)       # tables.pairs: each microbenchmark's own comparison, last


def build(run: Path, data, analysis, regressions: Sequence[str] = ()) -> Report:
    """The report of a run from its RunData and Analysis (sweeper.analysis.run.analyze_run);
    `regressions`: the lines of the alerts the history found for it (sweeper.history.Recorded)."""
    from sweeper.analysis.recommend import recommendation_lines
    from sweeper.report import figures, tables

    figs = [
        FigureOut("steps", "Step-time distribution per cell", *figures.step_distributions(data.steps, analysis)),
        FigureOut("heatmap", "Heatmap over two swept axes", *figures.heatmap(analysis, analysis.config.heatmap)),
        FigureOut("memory", "Throughput against peak memory", *figures.throughput_vs_memory(analysis)),
        FigureOut("phases", "Phase times per cell", *figures.phase_stack(tables.phase_means(data.steps, analysis))),
    ]
    sweep = next((r.get("sweep") for r in data.records), None) or Path(run).parent.name
    run_id = next((r.get("run_id") for r in data.records), None) or Path(run).name
    return Report(title=f"{sweep} / {run_id}", facts=tables.run_facts(data.records, analysis),
                  verdicts=tables.verdicts(analysis), noise_floor=tables.noise_floor(analysis),
                  recommendation=recommendation_lines(analysis), notes=analysis.notes,
                  statistics=tables.cell_statistics(analysis), failures=tables.failures(data.records),
                  figures=figs, pitfalls=tables.pitfall_lines(analysis), overlap=tables.overlap_table(analysis),
                  scaling=tables.scaling_table(analysis), fleet=tables.fleet(analysis),
                  verdicts_title=tables.verdicts_title(analysis), pairs=tables.pairs(analysis),
                  regressions=list(regressions))


def write_report(run_dir, data, analysis, regressions: Sequence[str] = ()) -> Tuple[Path, Path]:
    """Writes report.html, report.md and report_figures/*.png into the run folder."""
    from sweeper.files import write_bytes_atomic, write_text_atomic
    from sweeper.report import html, markdown

    run = Path(run_dir)
    report = build(run, data, analysis, regressions)
    (run / FIGURES_DIR).mkdir(exist_ok=True)
    for figure in report.figures:
        if figure.png is not None:
            write_bytes_atomic(run / figure.file, figure.png)
    html_path, md_path = run / "report.html", run / "report.md"
    write_text_atomic(html_path, html.render(report))
    write_text_atomic(md_path, markdown.render(report))
    return html_path, md_path
