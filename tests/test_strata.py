"""Comparing within strata (analysis.compare_within, and `workload` in a run of several), and
two fixes of the one analysis: a float baseline matches as a typed value, and a noise floor of
tied repeats is "too few repeats" instead of a crash. Constructed frames with known answers."""
import numpy as np
import pandas as pd
import pytest

from sweeper import display
from sweeper.analysis import stats, strata
from sweeper.analysis.model import ALONE, BASELINE
from sweeper.analysis.run import analyze
from sweeper.analysis.recommend import recommendation_lines
from sweeper.analysis.run import cell_summary
from sweeper.analysis.text import same_value
from sweeper.report import tables
from sweeper.schema import AnalysisConfig

EMPTY = pd.DataFrame()
KIND, LOADER = "data.kind", "data.loader"


def _around(center, n, seed):
    return list(center * (1 + 0.01 * np.random.default_rng(seed).standard_normal(n)))


def _summary(cells_: dict) -> pd.DataFrame:
    """{cell_id: (swept values, [per-repeat step seconds])}: 32 items a step; nothing marked baseline."""
    rows = []
    for cell_id, (values, seconds) in cells_.items():
        for repeat, s in enumerate(seconds):
            rows.append({"trial_id": f"{cell_id}-{repeat}", "cell_id": cell_id, "repeat": repeat,
                         "is_baseline": False, "status": "ok", **values, "step_p50_s": s, "step_p95_s": 2 * s,
                         "step_mean_s": s, "items_per_s": 32 / s, "started_at": 1000.0 + repeat})
    return pd.DataFrame(rows)


def _loaders(images_also_torch=True):
    """tokens: DALI 2x slower than torch; images: DALI 2x faster. 6 torch repeats, 3 DALI."""
    out = {"tt": ({KIND: "tokens", LOADER: "torch"}, _around(0.010, 6, 0)),
           "td": ({KIND: "tokens", LOADER: "dali"}, _around(0.020, 3, 1)),
           "id": ({KIND: "images", LOADER: "dali"}, _around(0.010, 3, 3))}
    if images_also_torch:
        out["it"] = ({KIND: "images", LOADER: "torch"}, _around(0.020, 6, 2))
    return out


STRATIFIED = AnalysisConfig(baseline="data.loader=torch", compare_within=[KIND])


def test_each_stratum_has_its_own_baseline_verdicts_noise_floor_and_recommendation():
    a = analyze(_summary(_loaders()), EMPTY, STRATIFIED)
    assert a.strata_keys == (KIND,) and a.baseline_id is None
    assert [(s.label, s.cell_ids) for s in a.strata] == [("kind=tokens", ("tt", "td")), ("kind=images", ("id", "it"))]
    assert a.baselines == {"kind=tokens": "tt", "kind=images": "it"}
    v = a.verdicts.set_index("cell_id")
    assert v.loc["td", "verdict"] == stats.SLOWER and v.loc["id", "verdict"] == stats.FASTER
    assert v.loc["tt", "verdict"] == v.loc["it", "verdict"] == BASELINE
    # each DALI cell against its own kind's DataLoader: 0.5x and 2x, not against one baseline
    assert v.loc["td", "throughput_ratio"] == pytest.approx(0.5, rel=0.05)
    assert v.loc["id", "throughput_ratio"] == pytest.approx(2.0, rel=0.05)
    # Holm within the stratum: a family of one comparison leaves p as it is (across both: x 2)
    assert v.loc["td", "throughput_p_adj"] == v.loc["td", "throughput_p"]
    # stratum by stratum in order of appearance, each baseline first
    assert list(a.verdicts["cell_id"]) == ["tt", "td", "it", "id"]
    assert list(a.verdicts["stratum"]) == ["kind=tokens"] * 2 + ["kind=images"] * 2
    assert all(s.noise_floor is not None and s.noise_floor.n_a + s.noise_floor.n_b == 6 for s in a.strata)
    recs = {s.label: s.recommendation for s in a.strata}
    assert recs["kind=tokens"].is_baseline and recs["kind=images"].cell_id == "id"
    lines = recommendation_lines(a)
    assert lines[0] == "constraints: none"
    assert any(line.startswith("kind=tokens: recommended: keep the baseline kind=tokens loader=torch")
               for line in lines)
    assert any(line.startswith("kind=images: recommended: kind=images loader=dali: +9") and
               "faster than the baseline" in line for line in lines), lines


def test_without_compare_within_one_baseline_and_no_stratum_column():
    a = analyze(_summary(_loaders()), EMPTY, AnalysisConfig(baseline="data.loader=torch"))
    assert a.strata_keys == () and a.baseline_id == "tt" and "stratum" not in a.cells.columns
    assert [(s.label, s.baseline_id) for s in a.strata] == [("", "tt")]       # one stratum, the whole run
    assert "stratum" not in a.verdicts.columns and tables.verdicts(a)[0][0] == "cell"
    # one family of 3 comparisons: the smallest p 6 vs 3 repeats allow (0.024) x 3 cannot pass;
    # within strata each family is 1 comparison and the same repeats give verdicts
    assert a.verdicts.set_index("cell_id").loc["id", "verdict"] == stats.TOO_FEW


def test_a_baseline_naming_the_strata_key_takes_its_other_settings_in_every_stratum():
    cfg = AnalysisConfig(baseline="data.kind=images data.loader=torch", compare_within=[KIND])
    a = analyze(_summary(_loaders()), EMPTY, cfg)
    assert a.baselines == {"kind=tokens": "tt", "kind=images": "it"}


def test_views_show_the_stratum_and_per_stratum_verdicts():
    a = analyze(_summary(_loaders()), EMPTY, STRATIFIED)
    header, rows = tables.verdicts(a)
    assert header[:2] == ["stratum", "cell"] and rows[1][:2] == ["kind=tokens", "kind=tokens loader=dali"]
    text = display.verdicts_text(a)
    assert "verdicts against each stratum's baseline (compared within kind):" in text
    assert "noise floor, kind=tokens (baseline A/A" in text and "noise floor, kind=images (baseline A/A" in text
    frame = cell_summary(a)                      # cells.parquet and the W&B table
    assert list(frame.columns[:3]) == ["cell_id", "cell", "stratum"]
    assert list(frame["stratum"]) == ["kind=tokens"] * 2 + ["kind=images"] * 2
    assert list(frame["verdict"]) == ["baseline", "slower", "baseline", "faster"]
    assert [r["stratum"] for r in tables.best_first(a)] == ["kind=tokens"] * 2 + ["kind=images"] * 2


def test_a_cell_alone_in_its_stratum_gets_no_verdict_and_says_so():
    a = analyze(_summary(_loaders(images_also_torch=False)), EMPTY, STRATIFIED)
    assert a.baselines == {"kind=tokens": "tt"}
    assert a.verdicts.set_index("cell_id").loc["id", "verdict"] == ALONE
    assert [s.alone for s in a.strata] == [False, True]
    # the views leave it out: no verdict row, noise floor or recommendation says "alone"
    assert not any("kind=images" in line for line in recommendation_lines(a))
    assert "kind=images" not in tables.noise_floor(a) and "kind=tokens" in tables.noise_floor(a)
    assert [row[0] for row in tables.verdicts(a)[1]] == ["kind=tokens", "kind=tokens"]
    assert any("1 cell(s) alone in their stratum get no verdict" in n for n in a.notes)


def test_a_key_with_one_value_splits_nothing_and_says_so():
    a = analyze(_summary(_loaders()), EMPTY, AnalysisConfig(compare_within=["data.batch_size"]))
    assert a.strata_keys == () and any("data.batch_size has one value in this run" in n for n in a.notes)
    one_kind = {k: v for k, v in _loaders().items() if v[0][KIND] == "images"}     # +sweep=loaders data.kind=images
    a = analyze(_summary(one_kind), EMPTY, STRATIFIED)
    assert a.strata_keys == () and a.baseline_id == "it" and "stratum" not in a.cells.columns


def test_compare_within_is_checked_with_its_dotted_key():
    from sweeper.errors import ConfigError

    with pytest.raises(ConfigError, match=r"analysis\.compare_within"):
        AnalysisConfig(compare_within=["kind"]).check()


# --------------------------------------------------------------------------- the two fixes


def test_a_float_baseline_matches_as_a_typed_value():
    axis = "workload.params.data_ms"
    summary = _summary({"slow": ({axis: 40.0}, _around(0.040, 4, 0)), "fast": ({axis: 1.0}, _around(0.001, 4, 1))})
    a = analyze(summary, EMPTY, AnalysisConfig(baseline=f"{axis}=1.0"))
    assert a.baseline_id == "fast" and not any("matches no cell" in n for n in a.notes)
    assert analyze(summary, EMPTY, AnalysisConfig(baseline=f"{axis}=1")).baseline_id == "fast"
    assert same_value(1.0, "1.0") and same_value(1, "1.0") and same_value(True, "true")
    assert not same_value(True, "1") and not same_value(1.0, "1.5") and same_value("Torch", "torch")


def test_a_noise_floor_of_two_tied_repeats_is_too_few_not_a_crash():
    summary = _summary({"b": ({"data.num_workers": 0}, [0.01, 0.01]), "c": ({"data.num_workers": 2}, [0.02, 0.02])})
    a = analyze(summary, EMPTY, AnalysisConfig(baseline="data.num_workers=0"))
    assert a.noise_floor.verdict == stats.TOO_FEW and a.noise_floor.p_value == 1.0
    assert "1 vs 1): throughput ratio 1.000 -, p 1.000: too few repeats" in tables.noise_floor(a)
    # one value a side with a tie elsewhere: the exact rank-sum permutation p, every arrangement
    assert stats.compare_cells([5.0, 6.0], [5.0]).p_value == pytest.approx(1.0)


def test_the_plan_splits_and_picks_baselines_by_the_same_rule():
    """plan.py asks analysis/strata.py: a stratum per data.kind, each with its own baseline,
    the configured one's key given by its tail as the analysis accepts it."""
    from sweeper.plan import ClusterShape, plan_trials
    from sweeper.schema import DataConfig, TrialConfig

    grid = [([f"data.kind={kind}", f"data.num_workers={n}"], TrialConfig(data=DataConfig(kind=kind, num_workers=n)))
            for kind in ("tokens", "images") for n in (0, 2)]
    trials = plan_trials(grid, ClusterShape(node_cpus=[4.0], node_gpus=[0.0]), baseline="num_workers=2",
                         compare_within=[KIND])
    assert [(t.swept[KIND], t.swept["data.num_workers"]) for t in trials if t.is_baseline] == \
        [("tokens", 2), ("images", 2)]


@pytest.mark.parametrize("key, keys, expected", [
    ("data.kind", ["data.kind", "data.loader"], "data.kind"),
    ("kind", ["data.kind", "data.loader"], "data.kind"),                # a tail names its setting
    ("ind", ["data.kind"], None),                                     # a tail is whole dotted parts
    ("size", ["data.image.size"], "data.image.size"),
    ("workload", ["workload", "data.kind"], "workload"),
])
def test_a_key_resolves_by_its_name_or_its_dotted_tail(key, keys, expected):
    assert strata.resolve(key, keys) == expected


def test_the_strata_rules_over_plain_values():
    cells = [{"workload": "a", "data.kind": k, "data.num_workers": n} for k in ("tokens", "images") for n in (0, 2.0)]
    lookups = [lambda key, c=c: c[strata.resolve(key, list(c)) or key] for c in cells]
    assert strata.first_match(lookups, "num_workers=2 kind=images") == 3        # typed: 2.0 matches "2"
    assert strata.first_match(lookups, "num_workers=3") is None
    assert strata.first_match(lookups, "data.loader=dali") is None              # a key no cell has matches nothing
    assert strata.groups(lookups, ["data.kind"]) == [[0, 1], [2, 3]]
    assert strata.groups(lookups, []) == [[0, 1, 2, 3]]                         # no keys: one stratum
    assert strata.strata_keys(["data.kind", "workload"], workloads=1) == ["data.kind"]
    assert strata.strata_keys(["data.kind"], workloads=2) == ["workload", "data.kind"]
    assert strata.within_stratum("kind=images data.num_workers=2", ["data.kind"]) == "data.num_workers=2"
    assert strata.within_stratum("data.kind=images", ["data.kind"]) is None
