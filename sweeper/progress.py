"""Progress while a sweep runs: a line per finished trial, and on a terminal a bar with an ETA.

The bar is tqdm's (a kept library: ETA, rate, resizing and redrawing around printed lines
are solved there); the lines are printed above it with `tqdm.write`. When the output is
piped or redirected (CI, a log file, cron) there is no bar, only the plain lines.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

LineOf = Callable[[int, int, float], str]      # (done, total, wall seconds) -> the trial's line


class Progress:
    def __init__(self, total: int, stream: Optional[TextIO] = None, bar: Optional[bool] = None):
        self.stream = stream or sys.stdout
        self.done, self.total = 0, total
        self.started = time.monotonic()
        use_bar = self.stream.isatty() if bar is None else bar
        self.bar = self._bar(total) if use_bar else None

    def _bar(self, total: int):
        from tqdm import tqdm

        return tqdm(total=total, unit="trial", file=self.stream, dynamic_ncols=True, leave=False,
                    bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} trials [{elapsed}<{remaining}]")

    def advance(self, n: int) -> None:
        """Trials already finished (a resumed run)."""
        self.done += n
        if self.bar is not None and n:
            self.bar.update(n)

    def grow(self, n: int = 1) -> None:
        """A retry joined the sweep (an out-of-memory trial shrunk)."""
        self.total += n
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def expect(self, total: int) -> None:
        """repeats=auto: the trials that may still run changed (a round was planned, cells were decided)."""
        self.total = max(total, self.done)
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def write(self, line: str) -> None:
        """A line above the bar (or a plain line without one)."""
        if self.bar is None:
            print(line, file=self.stream, flush=True)
        else:
            self.bar.write(line, file=self.stream)

    def trial_done(self, line_of: LineOf) -> None:
        self.done += 1
        line = line_of(self.done, self.total, time.monotonic() - self.started)
        if self.bar is None:
            print(line, file=self.stream, flush=True)
            return
        self.bar.write(line, file=self.stream)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
