"""The process exit code, raised by whatever the sweep ran into (worst wins: the largest).

A scheduler (cron, a systemd timer) reads it: 0 nothing to look at; 1 some trials failed;
2 bad input, nothing ran; 3 something regressed against earlier nights (the overnight suite's
regression hook); 69 the local Ray node the sweep started stopped mid-sweep (its raylet was killed:
the kernel's out-of-memory killer, or someone): what finished is kept, the rest did not run, and
the same command with resume=latest runs it (sysexits' EX_UNAVAILABLE, "a service is unavailable");
70 a bug in sweeper itself, with its traceback (sysexits' EX_SOFTWARE);
74 the machine refused a write: its disk is full, over quota or read-only (sysexits' EX_IOERR;
what finished is kept);
75 another suite holds the lock, or a resume's run folder is still being written by another sweep:
nothing ran (sysexits' EX_TEMPFAIL: try again later);
130 interrupted (Ctrl-C or SIGTERM);
141 the reader of the output went away (`| head`), as for a process SIGPIPE ends (128 + 13).
sweeper.cli maps every command's failures onto these.

The worst is the largest: 69 over 1, 2 and 3 (running the command again with resume=latest runs the
failed trials again too), and under 70 and 74 (a bug or a full disk needs a person before a rerun
helps). 69 is not 75: a start refused by the lock needs nothing done (docs/history.md's systemd unit
counts 75 a success), a sweep cut short by a lost node needs running again.
"""
OK = 0
TRIALS_FAILED = 1   # the sweep ran; some trials did not finish (their rows say why)
USAGE = 2           # bad input: nothing ran
REGRESSED = 3       # the suite ran; a cell regressed against its history (sweeper.overnight.regression_hook)
NODE_LOST = 69      # the sweep's own local Ray node died mid-sweep: one line; what finished is kept (faults.node_lost_line)
BUG = 70            # a bug in sweeper itself: printed with its traceback and a line that says so
NO_ROOM = 74        # a disk full, over quota or read-only: one line; what finished is kept (faults.no_room_line)
LOCKED = 75         # another overnight suite holds the lock, or another sweep writes the run resumed: nothing ran
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
