"""The process exit code, raised by whatever the sweep ran into (worst wins: the largest).

A scheduler (cron, a systemd timer) reads it: 0 nothing to look at; 1 some trials failed;
2 bad input, nothing ran; 3 something regressed against earlier nights (the overnight suite's
regression hook); 70 a bug in sweeper itself, with its traceback (sysexits' EX_SOFTWARE);
74 the machine refused a write: its disk is full, over quota or read-only (sysexits' EX_IOERR;
what finished is kept);
75 another suite holds the lock, nothing ran (sysexits' EX_TEMPFAIL: try again later);
130 interrupted (Ctrl-C or SIGTERM);
141 the reader of the output went away (`| head`), as for a process SIGPIPE ends (128 + 13).
sweeper.cli maps every command's failures onto these.
"""
OK = 0
TRIALS_FAILED = 1   # the sweep ran; some trials did not finish (their rows say why)
USAGE = 2           # bad input: nothing ran
REGRESSED = 3       # the suite ran; a cell regressed against its history (sweeper.overnight.regression_hook)
BUG = 70            # a bug in sweeper itself: printed with its traceback and a line that says so
NO_ROOM = 74        # a disk full, over quota or read-only: one line; what finished is kept (faults.no_room_line)
LOCKED = 75         # another overnight suite holds the lock: nothing ran
INTERRUPTED = 130   # Ctrl-C or SIGTERM: finished trials were kept
PIPE_CLOSED = 141   # stdout's reader went away (`| head`): the output stops, with no traceback

_code = OK


def reset() -> None:
    """A new command in the same process (the tests call the entry functions in-process)."""
    global _code
    _code = OK


def report(code: int) -> None:
    global _code
    _code = max(_code, code)


def code() -> int:
    return _code
