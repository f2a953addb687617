"""The process exit code, raised by whatever the sweep ran into (worst wins: the largest).

A scheduler (cron, a systemd timer) reads it: 0 nothing to look at; 1 some trials failed;
3 something regressed against earlier nights (the overnight suite's regression hook);
75 another suite holds the lock, nothing ran (sysexits' EX_TEMPFAIL: try again later).
"""
OK = 0
TRIALS_FAILED = 1   # the sweep ran; some trials did not finish (their rows say why)
USAGE = 2           # bad input: nothing ran
REGRESSED = 3       # the suite ran; a cell regressed against its history (sweeper.overnight.regression_hook)
LOCKED = 75         # another overnight suite holds the lock: nothing ran
INTERRUPTED = 130   # Ctrl-C or SIGTERM: finished trials were kept

_code = OK


def report(code: int) -> None:
    global _code
    _code = max(_code, code)


def code() -> int:
    return _code
