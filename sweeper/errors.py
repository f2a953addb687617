"""The one user-facing error type: its message says what to do, in one line."""


class SweeperError(Exception):
    """A problem the user can fix; printed as one line, no traceback. Its message is redacted
    (sweeper/redact.py) when it is made: it often quotes a value the user typed."""

    def __init__(self, message: object = "", *args: object) -> None:
        from sweeper.redact import redact_text

        super().__init__(redact_text(str(message)), *args)


class ConfigError(SweeperError):
    """A config value that cannot work; the message starts with the dotted key."""
