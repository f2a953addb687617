"""Reports of one run folder: report.html (self-contained) and report.md.

    from sweeper.report import write_report
    html_path, md_path = write_report("results/dataloader/20261129-193800")

Or from a shell: `python -m sweeper.report RUN_DIR [--metric p95] [--baseline "data.num_workers=0"]`.
The analysis settings come from the argument, else the run's own multirun.yaml
(its `analysis:` section), else the defaults.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from sweeper.schema import AnalysisConfig, ConstraintsConfig

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


def analysis_config(values: Optional[Dict[str, Any]]) -> AnalysisConfig:
    """AnalysisConfig from the resolved `analysis:` dict of a root config (checked)."""
    values = dict(values or {})
    constraints = ConstraintsConfig(**(values.pop("constraints", None) or {}))
    known = {f.name for f in dataclasses.fields(AnalysisConfig)}
    cfg = AnalysisConfig(**{k: v for k, v in values.items() if k in known}, constraints=constraints)
    cfg.heatmap = list(cfg.heatmap or [])
    cfg.check()
    return cfg


def run_analysis_config(run: Path) -> AnalysisConfig:
    """The `analysis:` section that the run was launched with (multirun.yaml), or defaults."""
    import yaml

    path = Path(run) / "multirun.yaml"
    if not path.exists():
        return AnalysisConfig()
    values = yaml.safe_load(path.read_text()) or {}
    return analysis_config(values.get("analysis"))


_ANALYSES: Dict[tuple, tuple] = {}


def analyze_run(run: Path, cfg: AnalysisConfig, n_resamples: int = 2000) -> tuple:
    """(RunData, Analysis) of a run folder, computed once for the report and the W&B summary
    run alike (the bootstrap is most of a sweep's closing seconds); a rewritten summary or
    other settings compute it afresh."""
    from sweeper.analysis.cells import analyze, load_run

    summary = Path(run) / "summary.parquet"
    stamp = summary.stat().st_mtime_ns if summary.exists() else None
    key = (str(Path(run).resolve()), repr(cfg), n_resamples, stamp)
    if key not in _ANALYSES:
        data = load_run(run)
        _ANALYSES.clear()                  # one run at a time: keep only the latest
        _ANALYSES[key] = (data, analyze(data.summary, data.steps, cfg, n_resamples=n_resamples))
    return _ANALYSES[key]


def build(run: Path, cfg: AnalysisConfig, n_resamples: int = 2000) -> Report:
    from sweeper.analysis.recommend import format_recommendation, recommend
    from sweeper.report import figures, tables

    data, analysis = analyze_run(run, cfg, n_resamples)
    figs = [
        FigureOut("steps", "Step-time distribution per cell", *figures.step_distributions(data.steps, analysis)),
        FigureOut("heatmap", "Heatmap over two swept axes", *figures.heatmap(analysis, cfg.heatmap)),
        FigureOut("memory", "Throughput against peak memory", *figures.throughput_vs_memory(analysis)),
        FigureOut("phases", "Phase times per cell", *figures.phase_stack(tables.phase_means(data.steps, analysis))),
    ]
    sweep = next((r.get("sweep") for r in data.records), None) or run.parent.name
    run_id = next((r.get("run_id") for r in data.records), None) or run.name
    return Report(title=f"{sweep} / {run_id}", facts=tables.run_facts(data.records, analysis),
                  verdicts=tables.verdicts(analysis), noise_floor=tables.noise_floor(analysis),
                  recommendation=format_recommendation(recommend(analysis, cfg)), notes=analysis.notes,
                  statistics=tables.cell_statistics(analysis), failures=tables.failures(data.records),
                  figures=figs)


def write_report(run_dir, cfg: Optional[AnalysisConfig] = None) -> Tuple[Path, Path]:
    """Writes report.html, report.md and report_figures/*.png into the run folder."""
    from sweeper.report import html, markdown
    from sweeper.results import write_bytes_atomic

    run = Path(run_dir)
    report = build(run, cfg or run_analysis_config(run))
    (run / FIGURES_DIR).mkdir(exist_ok=True)
    for figure in report.figures:
        if figure.png is not None:
            write_bytes_atomic(run / figure.file, figure.png)
    html_path, md_path = run / "report.html", run / "report.md"
    write_bytes_atomic(html_path, html.render(report).encode())
    write_bytes_atomic(md_path, markdown.render(report).encode())
    return html_path, md_path
