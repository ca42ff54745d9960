"""Guides written in a test and planned as the command line would plan them: the plan tests' shared builders."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from ci.guide.model import DocumentError, Plan, Problem
from ci.guide.parse import parse_guide
from ci.guide.plan import build_plan

FILE = "docs/guide.md"
F = "```"  # a fence, so that guides below read as they would in a file


def plan_of(
    text: str, *, preset_names: Iterable[str] = (), default_timeout_s: float | None = None, file: str = FILE
) -> Plan:
    return build_plan(parse_guide(text, file), preset_names=preset_names, default_timeout_s=default_timeout_s)


def problems_of(text: str, *, preset_names: Iterable[str] = (), file: str = FILE) -> list[Problem]:
    with pytest.raises(DocumentError) as caught:
        plan_of(text, preset_names=preset_names, file=file)
    return caught.value.problems


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line containing needle (a needle ending in a newline must end the line).

    This is the test's own reading of where a block or an error is.
    """
    if needle.endswith("\n"):
        hits = [n for n, line in enumerate(text.split("\n"), start=1) if line.endswith(needle[:-1])]
    else:
        hits = [n for n, line in enumerate(text.split("\n"), start=1) if needle in line]
    assert len(hits) >= nth, f"test bug: {needle!r} occurs {len(hits)} times in the guide"
    return hits[nth - 1]


def block(info: str, body: str = "true") -> str:
    return f"{F}{info}\n{body}\n{F}\n\n"


def pair(test_id: str, out: str = "ok", test_params: str = "", result_params: str = "") -> str:
    """A valid #test with its #test-result."""
    return block(f'shell #test id="{test_id}"{test_params}', f"echo {out}") + block(
        f'shell #test-result id="{test_id}"{result_params}', out
    )
