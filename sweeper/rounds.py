"""repeats=auto in a running sweep: after each round, which cells get another repeat.

The decisions are sweeper.analysis.sequential's `replay`, over each repeat's value as the
analysis computes it (sweeper.analysis.repeats: the steps that count and items/s from
measure/rules.py), so what the sweep stops on is what the report says. Holds the parsed
step tables of the trials that ended (each read once); knows no executor.
"""
from __future__ import annotations

import io
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from sweeper.analysis import sequential as seq
from sweeper.plan import Trial, next_repeat, strata_of
from sweeper.schema import RootConfig
from sweeper.trial import STEPS_FILE


@dataclass
class Stratum:
    baseline: str
    cells: List[str]                        # its members, the baseline among them


def strata(trials: Sequence[Trial], compare_within: Sequence[str]) -> List[Stratum]:
    """The plan's strata of two cells or more, each with the cell the plan marked as its baseline."""
    cells = list({t.cell_id: t for t in sorted(trials, key=lambda t: t.index)}.values())
    out = []
    for members in strata_of(cells, compare_within):
        ids = [cells[i].cell_id for i in members]
        bases = [cells[i].cell_id for i in members if cells[i].is_baseline]
        if len(ids) > 1 and bases:
            out.append(Stratum(bases[0], ids))
    return out


def comparisons(groups: Sequence[Stratum]) -> int:
    return max([len(s.cells) - 1 for s in groups] + [1])


class Rounds:
    """The sequential state of one sweep: templates of its cells, its strata, its design."""

    def __init__(self, root: RootConfig, trials: Sequence[Trial]):
        self.root = root
        self.templates = {t.cell_id: t for t in trials}
        self.strata = strata(trials, root.analysis.compare_within)
        self.design = seq.design_for(root.analysis, root.sequential, comparisons(self.strata))
        self.steps: Dict[str, Any] = {}
        self.rng = random.Random(root.order_seed)
        self.last: Dict[str, seq.Replayed] = {}

    def keep_steps(self, trial_id: str, files: Mapping[str, bytes]) -> None:
        """The trial's step table, parsed once as it ends."""
        import pandas as pd

        if STEPS_FILE in files:
            self.steps[trial_id] = pd.read_parquet(io.BytesIO(files[STEPS_FILE])).assign(trial_id=trial_id)

    def values(self, records: Sequence[Dict[str, Any]]) -> Dict[str, Dict[int, float]]:
        """cell -> repeat -> its value of analysis.metric, as the analysis computes it."""
        import pandas as pd

        from sweeper.analysis.model import COLUMN
        from sweeper.analysis.repeats import repeat_table
        from sweeper.results import summary_frame

        steps = [self.steps[r["trial_id"]] for r in records if r["trial_id"] in self.steps]
        table = repeat_table(summary_frame(records), pd.concat(steps, ignore_index=True) if steps else pd.DataFrame())
        out: Dict[str, Dict[int, float]] = {}
        for row in table.to_dict("records"):
            out.setdefault(row["cell_id"], {})[int(row["repeat"])] = float(row[COLUMN[self.root.analysis.metric]])
        return out

    def decide(self, records: Sequence[Dict[str, Any]],
               values: Optional[Dict[str, Dict[int, float]]] = None) -> Dict[str, seq.Replayed]:
        """Each stratum's decisions so far (keyed by its baseline)."""
        values, repeats = values if values is not None else self.values(records), _repeats(records)
        self.last = {s.baseline: seq.replay({c: values.get(c, {}) for c in s.cells},
                                            {c: seq.rounds_of(repeats.get(c, [])) for c in s.cells if c != s.baseline},
                                            s.baseline, self.design) for s in self.strata}
        return self.last

    def next_round(self, records: Sequence[Dict[str, Any]]) -> Tuple[List[Trial], int]:
        """(the next round's trials in a shuffled order, the most trials still possible after it)."""
        repeats, more, left = _repeats(records), [], 0
        values = self.values(records)
        decided = self.decide(records, values)
        for s in self.strata:
            replayed = decided[s.baseline]
            rounds = {c: seq.rounds_of(repeats.get(c, [])) for c in s.cells if c != s.baseline}
            wanted = [c for c in seq.wanting(replayed.decisions, rounds, self.design)
                      if not seq.last_failed(values.get(c, {}), repeats.get(c, []))]     # its row says why
            have = len(repeats.get(s.baseline, []))
            base = max(replayed.base_wanted - have, 0) if wanted else 0
            more += [next_repeat(self.templates[c], rounds[c]) for c in wanted]
            more += [next_repeat(self.templates[s.baseline], have + i) for i in range(base)]
            left += seq.trials_left(replayed, rounds, have, self.design) - len(wanted) - base
        self.rng.shuffle(more)
        return more, max(left, 0)

    def most_after_first(self) -> int:
        """The most trials the rounds after the first may take: every cell open to its maximum
        (what the progress bar counts before the first look)."""
        first = self.design.first
        left = 0
        for s in self.strata:
            cells = [c for c in s.cells if c != s.baseline]
            opened = seq.Replayed({c: seq.Decision(c) for c in cells}, 2 * first, 2 * first, {})
            left += seq.trials_left(opened, {c: first for c in cells}, 2 * first, self.design)
        return left

    def line(self) -> Optional[str]:
        """One line on the decisions so far: how many cells are decided, open, dropped."""
        decisions = [d for r in self.last.values() for d in r.decisions.values()]
        if not decisions:
            return None
        counts: Dict[str, int] = {}
        for d in decisions:
            key = "open" if d.is_open else d.verdict if d.reason != seq.DROPPED else seq.DROPPED
            counts[key] = counts.get(key, 0) + 1
        return "repeats=auto: " + ", ".join(f"{n} {k}" for k, n in counts.items())


def _repeats(records: Sequence[Dict[str, Any]]) -> Dict[str, List[int]]:
    """cell -> the repeat numbers of its trials, whatever their status (a failed repeat took its round)."""
    out: Dict[str, List[int]] = {}
    for r in records:
        out.setdefault(r["cell_id"], []).append(int(r.get("repeat") or 0))
    return out
