"""The final table, compared exactly."""
from sweeper.display import footer, progress_line, results_table

ROWS = [
    {"trial_id": "aaa-0", "status": "ok", "data.num_workers": 1, "data.pin_memory": True,
     "pin_memory_effective": False, "items_per_s": 5000.0, "step_p50_s": 0.006, "step_p95_s": 0.011,
     "time_to_first_batch_s": 0.1, "overrides": "data.num_workers=1"},
    {"trial_id": "bbb-0", "status": "failed", "data.num_workers": 8, "data.pin_memory": False,
     "items_per_s": None, "error_type": "ValueError", "overrides": "data.num_workers=8 +sweep=dataloader"},
    {"trial_id": "ccc-0", "status": "ok", "data.num_workers": 2, "data.pin_memory": False,
     "pin_memory_effective": False, "items_per_s": 10000.0, "step_p50_s": 0.003, "step_p95_s": 0.007,
     "time_to_first_batch_s": 0.06, "overrides": "data.num_workers=2"},
]


def test_table_is_sorted_best_first_with_failures_last():
    assert results_table(ROWS, ["data.num_workers", "data.pin_memory"]) == "\n".join([
        "num_workers  pin_memory  samples/s  p50 ms  p95 ms  first batch s  status  trial",
        "-----------  ----------  ---------  ------  ------  -------------  ------  -----",
        "2            False          10,000    3.00    7.00          0.060  ok      ccc-0",
        "1            True*           5,000    6.00   11.00          0.100  ok      aaa-0",
        "8            False               -       -       -              -  failed  bbb-0",
    ])


def test_footer_names_isolation_the_no_effect_setting_and_how_to_reproduce_failures():
    text = footer(ROWS, "node", "results/x/1")
    assert text.splitlines() == [
        "isolation: node (one trial per node at a time)",
        "* pin_memory=True had no effect: no CUDA device in the trial",
        "1 trial(s) did not finish; to reproduce one:",
        "  python -m sweeper data.num_workers=8 +sweep=dataloader  # failed: ValueError",
        "results: results/x/1",
    ]


def test_progress_line():
    record = {"trial_id": "ccc-0", "status": "ok", "swept": {"data.num_workers": 2},
              "summary": {"items_per_s": 10000.0, "step_p50_s": 0.003}}
    assert progress_line(3, 12, record, 4.25) == \
        "[ 3/12] ok      ccc-0  num_workers=2  10,000 samples/s  p50 3.00 ms  (4.2 s)"


def test_repeats_collapse_to_one_row_per_grid_point():
    def trial(cell, repeat, rate, status="ok"):
        return {"trial_id": f"{cell}-{repeat}", "cell_id": cell, "status": status, "data.num_workers": len(cell),
                "items_per_s": rate, "step_p50_s": 1 / rate if rate else None, "step_p95_s": None,
                "time_to_first_batch_s": 0.1}
    rows = [trial("a", 0, 100.0), trial("a", 1, 300.0), trial("a", 2, 200.0),
            trial("bb", 0, 1000.0), trial("bb", 1, None, "failed")]
    assert results_table(rows, ["data.num_workers"]).splitlines() == [
        "num_workers  samples/s  p50 ms  p95 ms  first batch s  status  cell",
        "-----------  ---------  ------  ------  -------------  ------  ----",
        "2                1,000    1.00       -          0.100  1/2 ok  bb",
        "1                  200    5.00       -          0.100  ok      a",
    ]
