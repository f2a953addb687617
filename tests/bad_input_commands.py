"""The bad-input cases of python -m sweeper.report, .compare, .publish and .exporters.prometheus."""
from tests import bad_input_files as files
from tests.bad_input_base import (BAD, NOT_PUBLISHED, RUN, Case, port_taken, run_with, with_report_spec,
                                  with_run)

CASES = [
    Case("report-damaged-steps", "9g", RUN, BAD, "steps.parquet", command="report",
         setup=run_with(files.damaged_parquet, "trials/*/steps.parquet")),
    Case("report-damaged-trial-json", "9g", RUN, BAD, "trial.json", command="report",
         setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("report-not-a-run", "9g", ("{T}",), BAD, "{T}", command="report"),
    Case("report-bad-metric", "9g", ("{T}", "--metric", "p99"), BAD, "--metric", command="report"),
    Case("report-baseline-matches-nothing", "9g", RUN + ("--baseline", "data.batch_size=7"), BAD, "--baseline", command="report", setup=with_run),
    Case("compare-damaged-trial-json", "9g", ("{RUN}", "{RUN}"), BAD, "trial.json", command="compare",
         setup=run_with(files.truncated_json, "trials/*/trial.json")),
    Case("compare-damaged-steps", "9g", ("{RUN}", "{RUN}"), BAD, "steps.parquet", command="compare",
         setup=run_with(files.damaged_parquet, "trials/*/steps.parquet")),
    Case("compare-missing-run", "9g", ("{T}/nope", "{T}/nope2"), BAD, "nope", command="compare"),
    Case("compare-bad-ratio", "9g", ("{RUN}", "{RUN}", "--max-ratio", "0"), BAD, "--max-ratio", command="compare",
         setup=with_run),
    Case("compare-json-a-folder", "9g", ("{RUN}", "{RUN}", "--json", "{T}"), BAD, "{T}", command="compare",
         setup=with_run),
    Case("prometheus-port-out-of-range", "9g", ("{RUN}", "--port", "70000"), BAD, "--port", command="prometheus",
         setup=with_run),
    Case("prometheus-port-negative", "9g", ("{RUN}", "--port", "-1"), BAD, "--port", command="prometheus", setup=with_run),
    Case("prometheus-port-in-use", "9g", ("{RUN}", "--port", "{PORT}"), BAD, "--port", command="prometheus",
         setup=port_taken),
    Case("prometheus-host-unknown", "9g", ("{RUN}", "--host", "nosuch.invalid"), BAD, "--host", command="prometheus", setup=with_run),
    Case("prometheus-no-run", "9g", ("{T}",), BAD, "{T}", command="prometheus"),
    Case("prometheus-no-history-store", "9g", ("{RUN}", "--history", "{T}/nohist"), BAD, "--history",
         command="prometheus", setup=with_run),
    Case("publish-without-key", "intro", RUN, NOT_PUBLISHED, "{RUN}", command="publish", setup=with_report_spec),
    Case("publish-not-a-run", "intro", ("{T}",), BAD, "{T}", command="publish"),
]
