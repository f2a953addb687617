"""Regressions across nights when each night has few repeats (repeats=auto stops a decided cell
at 2 or 3): the exact Mann-Whitney test cannot reach alpha there (2 against 2: p >= 0.33), so
the history tests such nights with Welch's t-test on log values. In-process, pinned numbers."""
import math

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from sweeper.analysis import stats
from sweeper.history import detect

SETTINGS = detect.Settings()


def test_two_repeats_a_side_a_30_percent_drop_is_significant_where_mann_whitney_cannot_be():
    base, night = [1000.0, 1012.0], [770.0, 781.0]
    assert stats.compare_cells(base, night, higher_is_better=True).verdict == stats.TOO_FEW
    c = detect.night_test(base, night, SETTINGS, higher=True)
    expected = scipy_stats.ttest_ind(np.log(base), np.log(night), equal_var=False).pvalue
    assert c.verdict == stats.SLOWER and math.isclose(c.p_value, expected) and c.p_value < 0.05


def test_two_repeats_of_the_same_level_is_no_change():
    c = detect.night_test([1000.0, 1012.0], [1006.0, 996.0], SETTINGS, higher=True)
    assert c.verdict == stats.NO_CHANGE and c.p_value > 0.5


def test_enough_repeats_keep_the_exact_mann_whitney_p():
    c = detect.night_test([1000.0 + i for i in range(5)], [770.0 + i for i in range(5)], SETTINGS, higher=True)
    assert c.verdict == stats.SLOWER and math.isclose(c.p_value, 2 / math.comb(10, 5))     # fully separated


def test_a_single_repeat_a_side_has_no_test():
    assert math.isnan(detect.welch_log_p([1000.0], [770.0, 760.0]))


def _nights(items: list) -> pd.DataFrame:
    """One cell, a night per entry: (its two repeats' items/s); p95 from the step time."""
    rows = []
    for i, repeats in enumerate(items):
        p95 = [8.0 / r for r in repeats]
        rows.append({"machine": "m", "sweep": "s", "cell_id": "c", "cell": "workers=4", "run_id": f"n{i}",
                     "date": f"2026-06-0{i + 1}", "started_at": float(i), "repeats": len(repeats),
                     "items_per_s": float(np.median(repeats)), "p95": float(np.median(p95)),
                     "repeat_items_per_s": repeats, "repeat_p95": p95})
    return pd.DataFrame(rows)


def test_a_second_night_of_two_repeats_that_regressed_alerts():
    """Two nights: no change point can be placed yet, so the test is the only evidence there is."""
    frame = _nights([[1000.0, 1010.0], [760.0, 768.0]])
    found = detect.alerts_of(detect.assess(frame, SETTINGS))
    assert {(a.metric, a.run_id, a.baseline_run, a.evidence) for a in found} == {
        ("throughput", "n1", "n0", "significant"), ("p95", "n1", "n0", "significant")}
