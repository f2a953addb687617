"""Keeps credentials out of everything sweeper writes or prints: the one home of redaction.

Three rules, applied to every string of a value, whatever its structure:

- the values of environment variables named like credentials (WANDB_API_KEY,
  AWS_SECRET_ACCESS_KEY, HF_TOKEN, ...) become "[redacted:NAME]";
- the userinfo of any URL becomes "***": https://user:PASS@host -> https://***@host, also
  inside a command (pipe:curl -s https://u:p@h/x.tar);
- the value of a key named like a credential (token, secret, password, passwd, api_key,
  access_key, credential: `workload.params.api_token`, `HF_TOKEN`, `apiKey`) becomes
  "[redacted]", as a mapping's key or as `key=value` in text (an override, a cell label).

`remember(config)` adds the credentials the last two rules find in a sweep's config to the
literals replaced everywhere, so a trial's log or an error message that repeats one is
redacted too. The sweep's launcher calls it once; the driver redacts each trial's record,
config and files once, as they enter it (sweeper/driver.py); every later writer reads those.
The trial itself always gets the real values.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Dict, Mapping, Optional

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_SECRET_KEY = re.compile(r"(^|[_-])(token|secret|passw(or)?d|credentials?|api[_-]?key|access[_-]?key|private[_-]?key"
                         r"|secret[_-]?key|auth[_-]?token)([_-]|$)", re.IGNORECASE)
_RATE = re.compile(r"(^|[_-])per[_-]", re.IGNORECASE)        # flops_per_token is a rate, not a credential
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)([^\s/@'\"<>]+)@")
_KEY_VALUE = re.compile(r"(?P<key>[\w.+~-]*\w)=(?P<value>[^\s'\",;&)]+)")
_MIN_LENGTH = 6   # shorter literals would redact ordinary words and numbers
HIDDEN = "[redacted]"
USERINFO = "***"

_remembered: Dict[str, str] = {}


@lru_cache(maxsize=4096)
def secret_key(key: str) -> bool:
    """A key named like a credential: its last dotted part (workload.params.api_token)."""
    name = key.rsplit(".", 1)[-1].lstrip("+~")
    return bool(_SECRET_KEY.search(name)) and not _RATE.search(name)


def secrets(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """{literal: label} to replace: credentials of the environment, and (for this process's
    environment) those remembered from the sweep's config."""
    env = os.environ if environ is None else environ
    found = {value: f"[redacted:{name}]" for name, value in env.items()
             if _SECRET_NAME.search(name) and len(value) >= _MIN_LENGTH}
    return {**_remembered, **found} if environ is None else found


def remember(value: Any) -> None:
    """Adds the credentials found in a config (URL passwords, values of secret-named keys) to
    the literals every later redaction replaces, wherever they appear."""
    for literal, label in _found_in(value, None):
        if len(literal) >= _MIN_LENGTH:
            _remembered[literal] = label


def _found_in(value: Any, key: Optional[str]):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _found_in(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _found_in(v, key)
    elif key is not None and secret_key(key) and _scalar(value):
        yield str(value), HIDDEN
    elif isinstance(value, str):
        for match in _URL_USERINFO.finditer(value):
            yield match.group(2).split(":", 1)[-1], USERINFO
        for match in _KEY_VALUE.finditer(value):
            if secret_key(match.group("key")):
                yield match.group("value"), HIDDEN


def _scalar(value: Any) -> bool:
    """A value a credential can be: text or a whole number (a float is a figure)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool) and value != ""


def redact_text(text: str, found: Optional[Dict[str, str]] = None) -> str:
    """The text with every credential replaced (the three rules and the remembered literals)."""
    for value, label in (secrets() if found is None else found).items():
        if value in text:
            text = text.replace(value, label)
    if "@" in text:
        text = _URL_USERINFO.sub(lambda m: m.group(1) + USERINFO + "@", text)
    if "=" in text:
        text = _KEY_VALUE.sub(_hide_value, text)
    return text


def _hide_value(match: "re.Match[str]") -> str:
    hide = secret_key(match.group("key")) and not match.group("value").startswith("[redacted")
    return f"{match.group('key')}={HIDDEN}" if hide else match.group(0)


def redact(value: Any, found: Optional[Dict[str, str]] = None) -> Any:
    """The same structure with every credential in it replaced."""
    return _walk(value, secrets() if found is None else found, None)


def _walk(value: Any, found: Dict[str, str], key: Optional[str]) -> Any:
    if key is not None and secret_key(key) and _scalar(value):
        return HIDDEN
    if isinstance(value, str):
        return redact_text(value, found)
    if isinstance(value, dict):
        return {(redact_text(k, found) if isinstance(k, str) else k): _walk(v, found, str(k))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v, found, key) for v in value)
    return value


TEXT_SUFFIXES = (".log", ".txt", ".json", ".yaml", ".md", ".csv")


def redact_file(name: str, data: bytes, found: Optional[Dict[str, str]] = None) -> bytes:
    """Text files are redacted here; binary ones (steps.parquet) were redacted before they were
    written, since replacing bytes inside a compressed file would corrupt it."""
    if not name.endswith(TEXT_SUFFIXES):
        return data
    return redact_text(data.decode("utf-8", errors="surrogateescape"), found).encode("utf-8", errors="surrogateescape")
