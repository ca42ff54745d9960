"""Rewriting a plain-fence guide's expected text, an excerpt searched for anywhere in the output (pure).

The excerpt is realigned with the output by ci.maintain.realign's aligner,
read with the search's grammar (ci.expect.search: `...` any text, `1.2.x` a
version, a word `xxx` one word) and with free ends: the output lines around
the span it fits best cost nothing.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping, Sequence

from ci.expect.search import SearchPattern, as_expected, expected_runs, search_matches, search_pattern
from ci.guide.placeholders import substitute
from ci.maintain.realign import (
    MAX_ALIGN_CELLS,
    MAX_INTRA_LINE_CHARS,
    BodyLine,
    CannotRewrite,
    Costs,
    Grammar,
    body_line,
    rewritten_lines,
)

__all__ = ["MAX_SIMILAR_CELLS", "MAX_WHOLE_CHARS", "MAX_WHOLE_LINES", "updated_excerpt"]

MAX_SIMILAR_CELLS = 200_000  # excerpt lines x output lines compared for likeness (a changed line's new text)
# An output longer than this is never an excerpt whole: a ```text fence that long says nothing a reader checks, and
# the search's time grows with its length times the output's
MAX_WHOLE_LINES, MAX_WHOLE_CHARS = 100, 16 * 1024

# The costs of the alignment's steps (realign's, times ten): a changed line is rewritten from the output line most
# like it (difflib's quick ratio at least _SIMILAR_RATIO: from _LIKE_COST for an equal text to twice that), and
# rewriting it from an unlike one costs as much as dropping it: a line inserted between two kept ones is cheaper
# than a kept one given up for a rewritten one.
_INSERT_COST, _LIKE_COST, _UNLIKE_COST, _SIMILAR_RATIO = 20, 10, 30, 0.6

_START, _END = "\x02", "\x03"  # put around a line and its pattern, so that the search finds the pattern whole


@functools.lru_cache(maxsize=256)
def _anchored(pattern: str) -> SearchPattern:
    return search_pattern(_START + pattern + _END)


_SEARCH = Grammar(  # the plain-fence dialect's search (ci.expect.search): `...` any text, `1.2.x` and `xxx` one word
    split=expected_runs,
    spans=lambda token: token == "...",
    fits=lambda output, pattern: _anchored(pattern).found_in(_START + output + _END),
    literal=as_expected,
)


def _likeness(line: BodyLine, outputs: Sequence[str]) -> list[float]:
    """How like the body line each output line is, 0.0 when under _SIMILAR_RATIO: difflib's quick_ratio (the
    characters they share, in any order), in time linear in the lines' length, as the full ratio is not."""
    if not line.words.strip() or len(line.words) > MAX_INTRA_LINE_CHARS:
        return [0.0] * len(outputs)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(line.words)  # analysed once, compared with each output line in turn
    alike = []
    for out in outputs:
        matcher.set_seq1(out)
        ratio = matcher.quick_ratio() if matcher.real_quick_ratio() >= _SIMILAR_RATIO else 0.0
        alike.append(ratio if ratio >= _SIMILAR_RATIO and len(out) <= MAX_INTRA_LINE_CHARS else 0.0)
    return alike


def _costs(*, compare: bool) -> Costs:
    """An excerpt's: free ends; rewriting a line from an output line like it (when COMPARE) the cheaper, the likelier."""

    def replace(line: BodyLine, outputs: Sequence[str]) -> list[int]:
        if not compare:
            return [_UNLIKE_COST] * len(outputs)
        return [
            _LIKE_COST + round(_LIKE_COST * (1 - r) / (1 - _SIMILAR_RATIO)) if r else _UNLIKE_COST
            for r in _likeness(line, outputs)
        ]

    return Costs(insert=_INSERT_COST, delete=_UNLIKE_COST, replace=replace, free_ends=True)


_CLOSES_A_FENCE = re.compile(r" {0,3}`{3}")  # a line a Markdown reader, or the plain-fence one, would end the fence at


def updated_excerpt(body: str, output: str, values: Mapping[str, str] | None = None) -> str | None:
    """A searched expected text (the plain-fence dialect's) rewritten so that the search finds it in `output`, kept
    an excerpt: the old text is aligned with the span of output lines it fits best (its first line may end an output
    line, its last begin one), lines that still fit are kept as written (their `...`, `xxx`, `1.2.x` and
    placeholders too), a changed line becomes the output line in its place, or the one most like it, keeping the
    wildcards whose neighbouring text is still there, and output lines in between are added. When no line of it
    finds its place, the whole output is the new text, if it holds at most MAX_WHOLE_LINES lines and
    MAX_WHOLE_CHARS characters (CannotRewrite otherwise).

    Output written as it is keeps its meaning: a version such as `8.0.x` becomes `8.0...` (the search would read
    the former as digits), and a line that would close the fence (three backticks) gets `...` before it. Blank
    lines at either end are dropped, as the dialect drops them. `body` as written (load placeholders in place),
    `values` the {placeholder: value} pairs the run substituted. The body itself when it is still found; None when
    the output cannot be written so that the search finds it (it is blank, or holds a placeholder's name).
    CannotRewrite when a loaded value spans several lines.
    """
    pairs = tuple((values or {}).items())
    if any("\n" in value for _, value in pairs):
        raise CannotRewrite("a loaded value spans several lines; update this expected text by hand")

    def found(candidate: str) -> bool:
        return bool(candidate.strip()) and search_matches(output, substitute(candidate, pairs))

    if found(body):
        return body
    outputs = output.splitlines()  # as the search reads the output: every kind of line break
    texts = body.split("\n")
    lines = [
        body_line(
            text, dict(pairs), _SEARCH, before="..." if i == 0 else "", after="..." if i == len(texts) - 1 else ""
        )
        for i, text in enumerate(texts)
    ]
    if outputs and len(lines) * len(outputs) <= MAX_ALIGN_CELLS:
        for per_character in (True, False):
            costs = _costs(compare=len(lines) * len(outputs) <= MAX_SIMILAR_CELLS)
            new_lines, placed = rewritten_lines(
                lines, outputs, _SEARCH, dict(pairs), per_character=per_character, costs=costs
            )
            if not placed:
                break
            candidate = _excerpt_text(new_lines)
            if found(candidate):
                return candidate
    whole = _excerpt_text([as_expected(line) for line in outputs])
    if whole.count("\n") >= MAX_WHOLE_LINES or len(whole) > MAX_WHOLE_CHARS:
        raise CannotRewrite(
            f"no line of the expected text is found in the output, whose {len(outputs)} lines are too many to expect"
            f" whole (at most {MAX_WHOLE_LINES} lines, {MAX_WHOLE_CHARS // 1024} KiB): write the excerpt to expect by"
            " hand"
        )
    return whole if found(whole) else None


def _excerpt_text(lines: Sequence[str]) -> str:
    """LINES as a ```text fence's body: blank lines at either end dropped, a line that would close the fence
    written after a `...`."""
    kept = list(lines)
    while kept and not kept[-1].strip():
        kept.pop()
    while kept and not kept[0].strip():
        kept.pop(0)
    return "\n".join("..." + line.lstrip(" ") if _CLOSES_A_FENCE.match(line) else line for line in kept)
