"""The one user-facing error type: its message says what to do, in one line."""


class SweeperError(Exception):
    """A problem the user can fix; printed as one line, no traceback."""


class ConfigError(SweeperError):
    """A config value that cannot work; the message starts with the dotted key."""
