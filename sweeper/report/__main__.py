"""`python -m sweeper.report RUN_DIR [--metric throughput|p50|p95] [--baseline "key=value ..."]`.

Analyses the run once and writes report.html, report.md and cells.parquet/csv from it."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    """The command behind the one error boundary (sweeper.cli): one line and exit 2 for bad input."""
    from sweeper import cli

    return cli.run(lambda: command(argv))


def command(argv: Optional[List[str]]) -> int:
    from sweeper.cli import Parser, text
    from sweeper.schema import METRICS

    parser = Parser(prog="python -m sweeper.report", description=__doc__)
    parser.add_argument("run_dir", type=text)
    parser.add_argument("--metric", choices=METRICS)
    parser.add_argument("--baseline", type=text, help='the baseline grid point, e.g. "data.num_workers=0"')
    args = parser.parse_args(argv)
    from sweeper.analysis.run import analyze_run, run_analysis_config
    from sweeper.errors import SweeperError
    from sweeper.publishers.cells_files import write_cells
    from sweeper.report import write_report

    run = Path(args.run_dir)
    if not (run / "summary.parquet").exists():
        print(f"error: {run} is not a run folder (no summary.parquet); give one: results/<sweep>/<run id>", file=sys.stderr)
        return 2
    try:
        cfg = run_analysis_config(run)
        changes = {k: v for k, v in (("metric", args.metric), ("baseline", args.baseline)) if v}
        cfg = dataclasses.replace(cfg, **changes)
        cfg.check()
        data, analysis = analyze_run(run, cfg)
        if args.baseline and any(s.baseline_id is None and not s.alone for s in analysis.strata):
            raise SweeperError(f"--baseline {args.baseline!r}: matches no cell of {run}, so the report would have "
                               f"no verdicts (nothing was rewritten); give key=value pairs of one of its cells")
        write_cells(run, analysis)
        html_path, md_path = write_report(run, data, analysis)
    except SweeperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    print(md_path.read_text())
    print(f"report: {html_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
