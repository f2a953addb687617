"""Keeps credentials out of everything sweeper writes.

Values of environment variables whose names look like credentials (WANDB_API_KEY,
AWS_SECRET_ACCESS_KEY, HF_TOKEN, ...) are replaced by "[redacted:NAME]" in records,
configs and logs before they reach a file, a report or W&B.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Mapping, Optional

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_MIN_LENGTH = 6   # shorter values would redact ordinary words and numbers


def secrets(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = os.environ if environ is None else environ
    return {value: name for name, value in env.items() if _SECRET_NAME.search(name) and len(value) >= _MIN_LENGTH}


def redact_text(text: str, found: Optional[Dict[str, str]] = None) -> str:
    for value, name in (secrets() if found is None else found).items():
        if value in text:
            text = text.replace(value, f"[redacted:{name}]")
    return text


def redact(value: Any, found: Optional[Dict[str, str]] = None) -> Any:
    """The same structure with every credential value in its strings replaced."""
    found = secrets() if found is None else found
    if not found:
        return value
    if isinstance(value, str):
        return redact_text(value, found)
    if isinstance(value, dict):
        return {redact(k, found): redact(v, found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, found) for v in value)
    return value


TEXT_SUFFIXES = (".log", ".txt", ".json", ".yaml", ".md", ".csv")


def redact_file(name: str, data: bytes, found: Optional[Dict[str, str]] = None) -> bytes:
    """Text files are redacted here; binary ones (steps.parquet) were redacted before they were
    written, since replacing bytes inside a compressed file would corrupt it."""
    if not name.endswith(TEXT_SUFFIXES):
        return data
    found = secrets() if found is None else found
    for value, name_ in found.items():
        data = data.replace(value.encode(), f"[redacted:{name_}]".encode())
    return data
