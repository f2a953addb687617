"""The one user-facing error type: its message says what to do, in one line; its class says
the command's exit code (`code`), read by every place that prints one."""
from sweeper import exitcodes


class SweeperError(Exception):
    """A problem the user can fix; printed as one line, no traceback. Its message is redacted
    (sweeper/redact.py) when it is made: it often quotes a value the user typed."""
    code = exitcodes.USAGE

    def __init__(self, message: object = "", *args: object) -> None:
        from sweeper.redact import redact_text

        super().__init__(redact_text(str(message)), *args)


class ConfigError(SweeperError):
    """A config value that cannot work; the message starts with the dotted key."""


class NoRoom(SweeperError):
    """A disk without room for what the run must write, found before it starts (exit code
    exitcodes.NO_ROOM; a write refused mid-run gets the same code: sweeper/faults.py)."""
    code = exitcodes.NO_ROOM
