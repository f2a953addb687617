"""The benchmark scripts' own arithmetic on made-up trial times: what each measures from a run
(span, makespan, per-trial cost, gaps, the start-up split) and the tables it prints. No timing
of this machine is asserted here (speed targets are met in benchmarks/, never in tests)."""
import dataclasses
import json
import math
import os
from pathlib import Path

import pytest

from benchmarks import gpu_packing, gpu_prestart, overhead, startup
from benchmarks._common import CommandRun, markdown_table, span


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


def _trial_json(results, index, started_at, ended_at, **figures):
    """A finished trial as sweeper writes it: results/<sweep>/<run>/trials/<id>/trial.json."""
    folder = results / "sweep" / "run" / "trials" / f"t{index}"
    folder.mkdir(parents=True)
    (folder / "trial.json").write_text(json.dumps({"started_at": started_at, "ended_at": ended_at,
                                                   "status": "ok", "figures": figures}))


def _fake_command(trials, ready_after_s=2.0, started_at=1000.0, wall_s=9.0):
    """run_timed's stand-in: a sweeper command that started at `started_at`, printed the ready line
    after `ready_after_s` and wrote `trials` (start, end, figures) into its results folder."""
    def run_timed(argv, log=None, **kw):
        results = Path(next(a.split("=", 1)[1] for a in argv if a.startswith("results_dir=")))
        for i, (start, end, figures) in enumerate(trials):
            _trial_json(results, i, start, end, **figures)
        return CommandRun(argv=list(argv), started_at=started_at, wall_s=wall_s, returncode=0,
                          lines=[(0.5, "composing"), (ready_after_s, "sweep 'x': 4 trial(s) on 2 CPU(s)")])
    return run_timed


def test_overhead_measures_a_run_from_its_trial_times_and_ready_line(tmp_path, monkeypatch):
    # 4 trials of 1 s on 2 slots (ideal span 2 s) spread over 3 s: each costs 0.5 slot-seconds extra
    trials = [(1003.0, 1004.0, {}), (1003.0, 1004.5, {}), (1004.5, 1005.5, {}), (1005.0, 1006.0, {})]
    monkeypatch.setattr(overhead, "run_timed", _fake_command(trials))
    runner = dataclasses.replace(overhead.RUNNERS["sweeper-pack"], slots=2)
    m = overhead.measure(runner, "sleep", 4, 1.0, tmp_path)
    assert (m.finished, m.wall_s, m.returncode) == (4, 9.0, 0)
    assert m.to_first_s == pytest.approx(3.0) and m.span_s == pytest.approx(3.0)
    assert m.ready_to_end_s == pytest.approx(4.0)            # ready line at 1002.0, last end 1006.0
    assert m.ideal_s == pytest.approx(2.0) and m.per_trial_s == pytest.approx(0.5)

    slow = dataclasses.replace(m, span_s=5.0, wall_s=11.0, returncode=1)
    table = overhead.runs_table([m, slow, dataclasses.replace(m, wall_s=10.0)], "sleep").splitlines()
    row = [c.strip() for c in table[2].strip("|").split("|")]
    assert row[0].endswith("(FAILED: see command.log)")      # one of its three runs failed
    assert row[3:5] == ["10.00", "2.50"]                      # median wall of 9, 10, 11 s; per trial
    assert row[6] == "3.00" and row[-1] == "0.50"             # median span, per-trial cost of the median run


def test_gpu_packing_efficiency_gaps_and_set_up_from_trial_times(tmp_path, monkeypatch):
    # two GPUs, two 3-s trials each; the ready line at 1002: makespan 8 s against an ideal 6 s
    trials = [(1003.0, 1006.0, {"gpu": "a", "compute_started_at": 1003.5}),
              (1006.5, 1009.5, {"gpu": "a", "compute_started_at": 1007.5}),
              (1003.0, 1006.0, {"gpu": "b", "compute_started_at": 1003.5}),
              (1006.0, 1010.0, {"gpu": "b", "compute_started_at": 1006.5})]
    monkeypatch.setattr(gpu_packing, "run_timed", _fake_command(trials))
    row = gpu_packing.measure("sweeper", gpu_packing.sweeper_command, 4, 3.0, 2, "cpu", tmp_path)
    assert row["trials"] == 4 and row["ideal_s"] == 6.0
    assert row["makespan_s"] == pytest.approx(8.0) and row["efficiency"] == pytest.approx(0.75)
    assert row["span_s"] == pytest.approx(7.0) and row["gap_s"] == pytest.approx(0.25)   # gaps 0.5 and 0.0
    assert row["setup_s"] == pytest.approx(0.5)                                          # 0.5, 1.0, 0.5, 0.5
    lines = gpu_packing.table([row, {**row, "trials": 3}]).splitlines()
    assert "| 75%" in lines[2] and "FAILED" not in lines[2] and "FAILED" in lines[3]


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


def test_prestart_window_takes_every_step_that_overlaps_it():
    steps = [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)]
    assert gpu_prestart.window(steps, 1.5, 3.0) == [1.0, 1.0]          # the step it starts in, and the next
    assert gpu_prestart.window(steps, 0.2, 0.4) == [1.0]
    assert gpu_prestart.window([(0.0, 1.0), (1.0, 3.5)], 1.0, 2.0) == [2.5]   # not the one that ended at its start


def test_startup_packing_is_the_work_over_the_slots_times_the_span():
    times = [{"started_at": 10.0 + 3.5 * i, "ended_at": 13.0 + 3.5 * i, "figures": {"prestart_wait_s": 0.01 * i}}
             for i in range(4)]   # one slot, 0.5 s gaps
    assert startup.packing(times, 4, 3.0, 1) == pytest.approx({"span_s": 13.5, "efficiency": 12 / 13.5,
                                                               "per_trial_s": 13.5 / 4, "prestart_wait_s": 0.03})
    two = [{"started_at": 0.0, "ended_at": 3.0}, {"started_at": 0.0, "ended_at": 3.0}]
    assert startup.packing(two, 2, 3.0, 4)["efficiency"] == pytest.approx(1.0)     # two trials fill two of 4 slots
    assert math.isnan(startup.packing(two[:1], 2, 3.0, 1)["efficiency"])            # a trial missing: no figure


def test_startup_commands_are_the_same_trial_on_any_host_and_relative_to_the_checkout(tmp_path):
    cmds = startup.commands("cuda", 0.5, 3, 3.0)
    assert cmds["floor"](tmp_path)[-1] == "import torch; torch.zeros(1, device='cuda')"
    assert "resources.gpus=1" in cmds["ray"](tmp_path) and "executor=local" in cmds["local"](tmp_path)
    assert "workload.seed=0,1,2" in cmds["packed"](tmp_path) and "dry_run=true" in cmds["dry_run"](tmp_path)
    cpu = startup.commands("cpu", 0.5, 3, 3.0)["ray"](tmp_path)
    assert "workload.device=cpu" in cpu and "+workload.params.seconds=0.5" in cpu


def test_startup_refuses_a_folder_that_holds_an_earlier_run(tmp_path, capsys):
    """Its timelines would be appended to, and the table read the earlier run's marks first."""
    (tmp_path / "ray" / "0").mkdir(parents=True)
    with pytest.raises(SystemExit, match="is not empty: give a new folder"):
        startup.main(["--out", str(tmp_path), "--runs", "1"])
    assert capsys.readouterr().out == ""                  # refused before any command ran


def test_startup_reads_top_level_import_times_and_names_the_heavy_ones():
    text = ("import time: self [us] | cumulative | imported package\n"
            "import time:       120 |        150 |   ray._private.utils\n"
            "import time:        90 |     900000 | ray\n"
            "import time:        40 |       2500 |     omegaconf.base\n"
            "import time:        30 |       4000 | omegaconf\n"
            "not an importtime line\n")
    found = startup.import_times(text)
    assert found == {"ray": 0.9, "omegaconf": 0.004}
    assert startup.describe({k: v for k, v in found.items() if k in startup.HEAVY}) == "imports ray (0.90 s)"
    assert startup.describe({}) == "imports none of " + "/".join(startup.HEAVY)
    assert span([{"started_at": 2.0, "ended_at": 5.0}, {"started_at": 1.0, "ended_at": 4.0}]) == (1.0, 5.0)
    assert markdown_table(["a", "b"], [[1.5, "x"]]).splitlines()[2] == "| 1.50 | x |"


def test_overhead_trial_spec_is_what_the_launcher_sends():
    spec = overhead.trial_spec(sleep_s=0.0)
    assert spec["config"].workload.target == overhead.WORKLOAD and spec["num_cpus"] == 1.0
    assert spec["trial_id"].endswith("-0") and spec["driver_pid"] == os.getpid()


def test_noisy_aa_judges_the_same_draws_as_a_fixed_run_over_its_first_repeats():
    from benchmarks import noisy_aa
    from sweeper.analysis.stats import SLOWER

    values = {"base": {r: 1.0 + 0.001 * r for r in range(24)}}
    values.update({f"c{i}": {r: 1.0 + 0.001 * r for r in range(7)} for i in range(noisy_aa.CELLS)})
    values["c0"] = {r: (0.7 + 0.001 * r if r < 5 else 9.0) for r in range(7)}   # slower in its first 5 only
    verdicts = noisy_aa._fixed(values, 5)
    assert len(verdicts) == noisy_aa.CELLS and verdicts.count(SLOWER) == 1
    assert SLOWER not in noisy_aa._fixed(values, 7)      # with its last two (far faster) the rank test sees no shift
