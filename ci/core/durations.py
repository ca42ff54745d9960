"""Durations as guides and command lines write them (`90`, `30s`, `10m`, `3h`), read as seconds."""

from __future__ import annotations

import re

__all__ = ["MAX_DURATION_S", "parse_duration", "shown_text"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smh]?)\Z")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_DURATION_S = 7 * 24 * 3600.0  # the longest time limit: a week is longer than any guide's run or CI job


def parse_duration(text: str) -> float:
    """Seconds from `90`, `30s`, `10m`, `3h` (decimals allowed), at most MAX_DURATION_S; ValueError otherwise."""
    found = _DURATION.match(str(text).strip())
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"bad duration {shown_text(text)}: use seconds (90) or a unit: 30s, 10m, 3h")
    seconds = float(found.group(1)) * _UNIT_S[found.group(2)]
    # `not <=` also refuses infinity, which 400 digits become and which no JSON report can hold
    if not seconds <= MAX_DURATION_S:
        raise ValueError(f"duration {shown_text(text)} is over the maximum of 7 days: give at most 168h")
    return seconds


def shown_text(text: str) -> str:
    """TEXT quoted for a message, its middle left out when long (a 400-digit number is no help to read)."""
    shown = repr(str(text))
    return shown if len(shown) <= 40 else f"{shown[:18]}...{shown[-18:]}"
