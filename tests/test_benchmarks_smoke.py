"""The benchmark scripts import, parse their arguments and build their commands; no timing
is asserted here (speed targets are met in benchmarks/, never in tests)."""
import os
import subprocess
import sys

import pytest

from benchmarks import gpu_packing, overhead, startup
from benchmarks._common import markdown_table, span
from tests.conftest import ROOT


class FakeProbe:
    def __init__(self):
        self.figures, self.steps = {}, 0

    def timed_figure(self, name):
        import contextlib

        @contextlib.contextmanager
        def timed():
            yield
            self.figures[name] = 0.0
        return timed()

    def step(self, items=None):
        self.steps += 1
        return self.timed_figure(f"step{self.steps}")


def test_overhead_dry_run_prints_every_runner_command(capsys, tmp_path):
    overhead.main(["--dry-run", "--trials", "3", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(overhead.RUNNERS) * len(overhead.WORKLOADS)
    assert any("-m sweeper" in line and "executor=local" in line for line in lines)
    assert any("baselines.py tune --trials 3" in line for line in lines)
    assert all("0,1,2" in line or "--trials 3" in line for line in lines)


def test_overhead_rejects_an_unknown_runner_or_workload():
    with pytest.raises(KeyError):
        overhead.parse(["--runners", "nope"])
    with pytest.raises(SystemExit):
        overhead.parse(["--workloads", "nope"])


def test_overhead_measurement_arithmetic():
    m = overhead.Measurement("tune", "sleep", trials=24, slots=2, sleep_s=1.0, returncode=0, finished=24,
                             wall_s=60.0, to_first_s=10.0, span_s=18.0, ready_to_end_s=20.0)
    assert m.ideal_s == 12.0 and m.per_trial_s == pytest.approx(0.5)


def test_gpu_packing_commands_and_parser(tmp_path):
    args = gpu_packing.build_parser().parse_args(["--device", "cpu", "--lengths", "1,2", "--trials", "2"])
    assert args.device == "cpu" and args.lengths == "1,2"
    cmd = gpu_packing.sweeper_command(tmp_path, 2, 3.0, "cuda")
    assert "resources.isolation=gpu" in cmd and "resources.gpus=1" in cmd and "workload.seed=0,1" in cmd
    assert "--plain-ray-child" in gpu_packing.plain_ray_command(tmp_path, 2, 3.0, "cuda")


def test_gpu_busy_runs_on_cpu_for_its_time():
    from benchmarks.gpu_busy import busy

    probe = FakeProbe()
    figures = busy(0.05, "cpu", 16, 2, 0, probe)
    assert figures["busy_s"] >= 0.05 and probe.steps >= 1
    assert {"cuda_init_s", "first_matmul_s"} <= set(probe.figures)


def test_gaps_between_trials_on_one_gpu():
    times = [{"started_at": 0.0, "ended_at": 3.0, "figures": {"gpu": "a", "compute_started_at": 0.5}},
             {"started_at": 3.25, "ended_at": 6.0, "figures": {"gpu": "a", "compute_started_at": 3.75}},
             {"started_at": 0.0, "ended_at": 3.0, "figures": {"gpu": "b", "compute_started_at": 0.5}}]
    assert gpu_packing.gaps_and_setup(times) == (0.25, 0.5)


def test_startup_parser_and_helpers():
    assert startup.build_parser().parse_args(["--runs", "2"]).runs == 2
    assert startup.describe({}) .startswith("imports none of ray/torch/wandb")
    assert span([{"started_at": 2.0, "ended_at": 5.0}, {"started_at": 1.0, "ended_at": 4.0}]) == (1.0, 5.0)
    assert markdown_table(["a", "b"], [[1.5, "x"]]).splitlines()[2] == "| 1.50 | x |"


@pytest.mark.parametrize("script", ["overhead.py", "startup.py", "gpu_packing.py", "baselines.py", "probe_overhead.py",
                                    "aa_experiment.py"])
def test_scripts_answer_help_without_heavy_imports(script):
    code = (f"import runpy, sys; sys.argv = ['{script}', '--help']\n"
            f"try:\n    runpy.run_path('benchmarks/{script}', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_overhead_trial_spec_is_what_the_launcher_sends():
    spec = overhead.trial_spec(sleep_s=0.0)
    assert spec["config"].workload.target == overhead.WORKLOAD and spec["num_cpus"] == 1.0
    assert spec["trial_id"].endswith("-0") and spec["driver_pid"] == os.getpid()
