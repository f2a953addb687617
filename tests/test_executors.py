"""Both executors feed the same driver: the same summary columns, tables and exit codes."""
import pandas as pd
import pytest

pytestmark = pytest.mark.slow

GRID = ["workload.target=tests.workloads_for_tests:quick,tests.workloads_for_tests:raises",
        "workload.steps=5", "workload.warmup_steps=1", "repeats=1", "report.enabled=false",
        "resources.isolation=pack"]


def run(sweeper_cli, tmp_path, executor, extra=()):
    result = sweeper_cli([*GRID, f"executor={executor}", f"sweep.name={executor}", *extra])
    folder = next((tmp_path / "results" / executor).iterdir())
    return result, folder


def table_header(stdout):
    """The final table's header line: the one just above its dashes."""
    lines = stdout.splitlines()
    return next(lines[i - 1] for i, line in enumerate(lines) if line.startswith("---"))


def test_local_and_ray_give_the_same_summary_columns_tables_and_exit_codes(sweeper_cli, tmp_path):
    on_ray, ray_run = run(sweeper_cli, tmp_path, "ray")
    local, local_run = run(sweeper_cli, tmp_path, "local")
    assert on_ray.returncode == local.returncode == 1, (on_ray.stderr[-2000:], local.stderr[-2000:])
    ray_summary = pd.read_parquet(ray_run / "summary.parquet")
    local_summary = pd.read_parquet(local_run / "summary.parquet")
    assert list(ray_summary.columns) == list(local_summary.columns)
    assert sorted(ray_summary["status"]) == sorted(local_summary["status"]) == ["failed", "ok"]
    assert sorted(ray_summary["trial_id"]) == sorted(local_summary["trial_id"])   # the same cells
    assert table_header(on_ray.stdout) == table_header(local.stdout)
    assert "on a local Ray" in on_ray.stdout and "on this process" in local.stdout
    for out in (on_ray.stdout, local.stdout):
        assert "1 trial(s) did not finish" in out and "python -m sweeper" in out
