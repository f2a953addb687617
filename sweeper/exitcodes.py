"""The process exit code, raised by whatever the sweep ran into (worst wins)."""
OK = 0
TRIALS_FAILED = 1   # the sweep ran; some trials did not finish (their rows say why)
USAGE = 2           # bad input: nothing ran
INTERRUPTED = 130   # Ctrl-C or SIGTERM: finished trials were kept

_code = OK


def report(code: int) -> None:
    global _code
    _code = max(_code, code)


def code() -> int:
    return _code
