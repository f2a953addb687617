"""The one error boundary of every command (`python -m sweeper`, `.report`, `.compare`,
`.history`, `.publish`, `.exporters.prometheus`).

A user's mistake is one line on stderr, `error: <key or file>: <what is wrong>; <what to do>`,
and exit 2; Ctrl-C or SIGTERM is one line and exit 130; anything else is a bug in sweeper
itself: its traceback, a line saying so, and exit 70. Hydra's own composition and override
errors (which `hydra.main` would print over several lines and exit 1 for) come here too.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Callable, Iterator, List, Optional

from sweeper import exitcodes
from sweeper.errors import SweeperError

BUG_LINE = "this is a bug in sweeper; please report it with the traceback above"


def run(entry: Callable[[], Optional[int]], interrupted: str = "before it finished: nothing more was written") -> int:
    """Calls `entry` and returns the exit code it gives or its failure maps to. SIGINT and
    SIGTERM stop every phase the same way (sweeper.interrupts), even where a shell started
    the command with SIGINT ignored."""
    from sweeper import interrupts

    try:
        with interrupts.stop_signals():
            try:
                return int(entry() or 0)
            except Exception:
                interrupts.raise_if_stopped()    # a stop a library swallowed came first: this is its echo
                raise
    except SystemExit as exc:
        return exit_status(exc)
    except KeyboardInterrupt:
        return interrupts.interrupted(interrupted)
    except SweeperError as exc:
        say(f"error: {exc}")
        return exc.code
    except BrokenPipeError as exc:
        return reader_gone() if stdout_gone() else fault(exc)
    except Exception as exc:   # a user's file or config, or a bug: decided by its type
        if during_interrupt(exc):
            return interrupts.interrupted(interrupted)
        return fault(exc)


def stdout_gone() -> bool:
    """Whether the reader of stdout went away (`... | head`): Linux flags such a pipe POLLERR."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (AttributeError, ValueError, OSError):
        return False


def reader_gone() -> int:
    """The output was cut short by its reader, not by a bug: no traceback, and stdout goes to
    /dev/null so that the interpreter's last flush does not fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return exitcodes.PIPE_CLOSED


def during_interrupt(exc: BaseException) -> bool:
    """Whether `exc` was raised while a Ctrl-C or SIGTERM unwound the program: a library's own
    clean-up that fails on the way out (omegaconf's flag reset, halfway through Hydra composing)
    is the interrupt, not a bug."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def fault(exc: Exception) -> int:
    from sweeper.faults import no_room_line, user_line

    full = no_room_line(exc)
    if full is not None:
        say(full)
        return exitcodes.NO_ROOM
    line = user_line(exc)
    if line is not None:
        say(line)
        return exitcodes.USAGE
    traceback.print_exc()
    say(BUG_LINE)
    return exitcodes.BUG


def say(line: str) -> None:
    print(" ".join(line.split()) if "\n" in line else line, file=sys.stderr, flush=True)


def exit_status(exc: SystemExit) -> int:
    """SystemExit's code as a number (argparse and `--help` exit through it)."""
    if exc.code is None or isinstance(exc.code, int):
        return int(exc.code or 0)
    say(str(exc.code))
    return exitcodes.USAGE


@contextlib.contextmanager
def hydra_raises() -> Iterator[None]:
    """Hydra's `run_and_report` prints its errors and exits 1; with HYDRA_FULL_ERROR it raises
    them instead, so `run` can turn them into one line and exit 2."""
    before = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = before


@contextlib.contextmanager
def argv_as(argv: List[str]) -> Iterator[None]:
    """`hydra.main` reads sys.argv; the entry functions take argv as an argument."""
    saved = sys.argv
    sys.argv = [saved[0] if saved else "sweeper", *argv]
    try:
        yield
    finally:
        sys.argv = saved


def text(value: str) -> str:
    """argparse type of a value typed on the command line: an empty one (an unset shell variable,
    most often) is refused, where it would read as not given, or as the current folder."""
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty (an unset variable?); give a value")
    return value


def path(value: str) -> Path:
    return Path(text(value))


MAX_COUNT = 10 ** 9       # past this a count is a typo (and past a C long, a TypeError deep in a library)


def count(value: str) -> int:
    """argparse type of a number of things: a whole number of at least 1."""
    if not text(value).strip().isdigit() or not 1 <= int(value) <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to {MAX_COUNT:,}; give one")
    return int(value)


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (it prints the usage, then the error)."""

    def parse_known_args(self, args=None, namespace=None):
        self.given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        say(f"error: {with_unknown_flags(self, message)}; see {self.prog} --help")
        raise SystemExit(exitcodes.USAGE)


def with_unknown_flags(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse reports missing arguments before flags it does not know, so `compare --bogus` said
    only that two run folders were missing: the unknown flags come first."""
    if not message.startswith("the following arguments are required"):
        return message
    given = getattr(parser, "given", [])
    given = given[:given.index("--")] if "--" in given else given
    known = list(parser._option_string_actions)
    number = getattr(parser, "_negative_number_matcher", None) or re.compile(r"^-\d+$|^-\d*\.\d+$")
    unknown = [a for a in given if a.startswith("-") and not number.match(a)
               and not any(k.startswith(a.split("=", 1)[0]) for k in known)]
    return f"unrecognized arguments: {' '.join(unknown)}; {message}" if unknown else message
