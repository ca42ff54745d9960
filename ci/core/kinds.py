"""How a guide is read: the dialects' names, and the time-limit rules by command kind (front matter, registry)."""

from __future__ import annotations

from ci.core.durations import parse_duration
from ci.core.model import TimeoutRule

__all__ = ["DIALECTS", "parse_dialect", "parse_timeout_rules"]

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
