"""The morning report's section per sweep of the night: its decisions and its recommendation.

Read from the history store's rows of the night's runs, which hold each cell's verdict against
its stratum's baseline and the run's recommendation as the run's one Analysis gave them
(store.decisions_of, store.recommendation_text): nothing here judges a cell again.
"""
from __future__ import annotations

from collections import Counter
from html import escape
from typing import List

import pandas as pd

from sweeper.analysis.model import ALONE, BASELINE, HIGHER_IS_BETTER
from sweeper.analysis.text import interval, num, pvalue
from sweeper.history.views import Table
from sweeper.report.html import table

RUN = ["machine", "sweep", "run_id"]
METRIC_LABEL = {"throughput": "items/s", "p50": "p50", "p95": "p95"}
SAYS_NOTHING = ("constraints: none",)       # a recommendation line that tells a reviewer nothing


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Stratum by stratum, the baseline first, then best first on the run's metric."""
    higher = str(rows["metric"].iloc[0]) in HIGHER_IS_BETTER
    key = rows["verdict_ratio"].astype(float) * (-1 if higher else 1)
    rank = (rows["verdict"] != BASELINE).astype(int)
    return (rows.assign(stratum=rows["stratum"].fillna(""), _rank=rank, _key=key.fillna(float("inf")))
            .sort_values(["stratum", "_rank", "_key", "cell"], kind="stable").drop(columns=["_rank", "_key"]))


def decisions_table(rows: pd.DataFrame) -> Table:
    """One row per cell: its decision, the ratio to its baseline with its interval (95%, or the
    sequential rule's repeated interval, as the run's verdict table has it), p (Holm), its
    repeats and, for a run of repeats=auto, why it got no more (decided, dropped from the race,
    at its maximum, budget)."""
    split = rows["stratum"].fillna("").astype(bool).any()
    sequential = rows["stopped"].notna().any()
    metric = str(rows["metric"].iloc[0])
    way = "higher" if metric in HIGHER_IS_BETTER else "lower"
    header = [*(["stratum"] if split else []), "cell", "decision",
              f"{METRIC_LABEL.get(metric, metric)} / baseline ({way} is faster)",
              "interval" if sequential else "95% CI", "p (Holm)", "repeats",
              *(["stopped"] if sequential else [])]
    body = [[*([r.stratum or "-"] if split else []), r.cell, r.verdict or "-", num(r.verdict_ratio, 1.0, 3),
             interval(r.verdict_ratio_low, r.verdict_ratio_high, 1.0, 3), pvalue(r.verdict_p), str(int(r.repeats)),
             *([r.stopped or "-"] if sequential else [])]
            for r in ordered(rows).itertuples()]
    return header, body


def counts_line(rows: pd.DataFrame) -> str:
    """"2 faster, 1 slower, 3 no detectable change": the night's decisions at a glance."""
    rows = ordered(rows)                        # ties read in the table's order
    judged = rows.loc[rows["verdict"].fillna("") != BASELINE, "verdict"].fillna("").replace("", "no verdict")
    return ", ".join(f"{n} {verdict}" for verdict, n in Counter(judged).most_common()) or "no cell to judge"


def recommendation(rows: pd.DataFrame) -> List[str]:
    lines = str(rows["recommendation"].iloc[0] or "").splitlines()
    return [line for line in lines if line not in SAYS_NOTHING]


def run_section(rows: pd.DataFrame) -> List[str]:
    """One run: its heading, its recommendation, the count of its decisions and their table."""
    first = rows.iloc[0]
    parts = [f"<h3>{escape(f'{first.sweep} {first.run_id} on {first.machine}')}</h3>"]
    if rows["verdict"].isna().all():
        return parts + ['<p class="note">no decisions in the history store for this run (appended before the '
                        "store kept them): its report.html has them</p>"]
    lines = recommendation(rows)
    parts += ['<ul class="rec">', *(f'<li class="{"pick" if "recommended" in line else ""}">{escape(line)}</li>'
                                    for line in lines), "</ul>"] if lines else []
    alone, judged = rows[rows["verdict"] == ALONE], rows[rows["verdict"] != ALONE]
    if not judged.empty:
        tbl = decisions_table(judged)
        html = table(tbl, [tbl[0].index("decision")])
        parts += [f"<p>{escape(counts_line(judged))}</p>", '<table class="decisions">', *html[1:]]
    return parts + ([f"<p>{escape(alone_line(alone))}</p>"] if len(alone) else [])


def alone_line(alone: pd.DataFrame) -> str:
    """The cells with nothing to compare them with (each the only cell of its stratum), in one line."""
    return (f"{len(alone)} cell(s) alone in their stratum, nothing to compare them with (their own "
            f"comparisons are in its report.html): {', '.join(sorted(alone['cell']))}")


def sweeps_section(tonight: pd.DataFrame) -> List[str]:
    """Every run of the night, in the order they ran."""
    parts = [f"<h2>Sweeps of the night: decisions and recommendation ({tonight.groupby(RUN).ngroups})</h2>"]
    for _, rows in tonight.sort_values("started_at", kind="stable").groupby(RUN, sort=False):
        parts += run_section(rows.reset_index(drop=True))
    return parts
