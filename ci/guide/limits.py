"""A block's time limit as a guide writes it: durations (`90`, `30s`, `10m`, `3h`), the dialects' names, and the
time-limit rules by command kind (front matter, registry)."""

from __future__ import annotations

import re

from ci.guide.model import TimeoutRule

__all__ = ["DIALECTS", "MAX_DURATION_S", "parse_dialect", "parse_duration", "parse_timeout_rules", "shown_text"]

DIALECTS = ("auto", "labels", "fences", "pycon")  # docs/authoring.md, section 10
_RULE_EXAMPLE = '[{contains: "cmake --build", timeout: 2h}, {contains: curl, timeout: 15m}]'


def parse_dialect(text: str) -> str:
    """A dialect's name as written (one of DIALECTS); ValueError naming them otherwise."""
    if text not in DIALECTS:
        raise ValueError(f"unknown dialect {text!r}; use one of {', '.join(DIALECTS)}")
    return text


def parse_timeout_rules(value: object) -> tuple[TimeoutRule, ...]:
    """Time-limit rules by command kind from a list of `{contains: TEXT, timeout: DURATION}` mappings, in order
    (the first whose text the command holds wins); ValueError saying what is wrong and how to write it."""
    if not isinstance(value, list):
        raise ValueError(f"must be a list of {{contains, timeout}} mappings, e.g. {_RULE_EXAMPLE}")
    rules = []
    for index, item in enumerate(value, 1):
        if not isinstance(item, dict) or set(item) != {"contains", "timeout"}:
            raise ValueError(f"item {index} must hold exactly the keys contains and timeout, e.g. {_RULE_EXAMPLE}")
        contains, timeout = item["contains"], item["timeout"]
        if not isinstance(contains, str) or not contains:
            raise ValueError(f"item {index}: contains must be a non-empty text (a piece of the command)")
        if "\n" in contains or "\r" in contains:
            # a rule is passed on as one --timeout-rule line (the workflow's timeout-rules input)
            raise ValueError(
                f"item {index}: contains must be one line: a rule matches a piece of one line of the command"
            )
        try:
            rules.append(TimeoutRule(contains, parse_duration(str(timeout))))
        except ValueError as exc:
            raise ValueError(f"item {index}: timeout: {exc}") from exc
    return tuple(rules)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smh]?)\Z")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_DURATION_S = 7 * 24 * 3600.0  # the longest time limit: a week is longer than any guide's run or CI job


def parse_duration(text: str) -> float:
    """Seconds from `90`, `30s`, `10m`, `3h` (decimals allowed), at most MAX_DURATION_S; ValueError otherwise."""
    found = _DURATION.match(str(text).strip())
    meant = None if found else _unit_in_words(str(text))
    written = found.groups() if found else meant
    if not written or float(written[0]) <= 0:
        raise ValueError(f"bad duration {shown_text(text)}: use seconds (90) or a unit: 30s, 10m, 3h")
    seconds = float(written[0]) * _UNIT_S[written[1]]
    # `not <=` also refuses infinity, which 400 digits become and which no JSON report can hold
    if not seconds <= MAX_DURATION_S:
        raise ValueError(f"duration {shown_text(text)} is over the maximum of 7 days: give at most 168h")
    if meant is not None:
        raise ValueError(f"bad duration {shown_text(text)}: write {''.join(meant)} (the units are s, m and h)")
    return seconds


# A unit written as a word or in capitals (`5min`, `2 hours`, `30 sec`, `1d`), with the unit it means and its factor
_UNIT_WORDS = {
    **dict.fromkeys(("sec", "secs", "second", "seconds"), ("s", 1)),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), ("m", 1)),
    **dict.fromkeys(("hr", "hrs", "hour", "hours"), ("h", 1)),
    **dict.fromkeys(("d", "day", "days"), ("h", 24)),
    **{unit: (unit, 1) for unit in "smh"},  # `5M`, read in lower case
}
_DURATION_IN_WORDS = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)\Z")


def _unit_in_words(text: str) -> tuple[str, str] | None:
    """TEXT's number and the unit it means, when written as a word or in capitals (`5min`: 5 and m, `1d`: 24 and
    h); None when it is no such slip."""
    found = _DURATION_IN_WORDS.match(text.strip())
    unit = _UNIT_WORDS.get(found.group(2).lower()) if found else None
    if found is None or unit is None:
        return None
    return f"{float(found.group(1)) * unit[1]:g}", unit[0]


def shown_text(text: str) -> str:
    """TEXT quoted for a message, its middle left out when long (a 400-digit number is no help to read)."""
    shown = repr(str(text))
    return shown if len(shown) <= 40 else f"{shown[:18]}...{shown[-18:]}"
