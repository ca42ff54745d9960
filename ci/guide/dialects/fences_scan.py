"""Fences as the plain dialects read them: every line opening with three backticks, up to the next such line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ci.base import frozen
from ci.guide.model import Problem, TimeoutRule
from ci.guide.parse import ascii_form, full_width_language

__all__ = ["Fence", "full_width_fence", "heading_above", "scan_fences", "timeout_by_kind", "unclosed_fence"]

_FENCE = "```"


@frozen
class Fence:
    """One fenced block as the plain dialects see it (no CommonMark nesting: a fence opens at a line's start)."""

    language: str  # the first word of the info string; "" when there is none
    markers: tuple[str, ...]  # the words after it (`skip`)
    body: str  # the lines between the fences, joined by newlines
    line: int  # 1-based line of the opening fence
    closing_line: int  # 1-based line of the closing fence
    followed_closely: bool  # only blanks between this fence's closing line and the next fence's opening one


def scan_fences(lines: Sequence[str]) -> list[Fence]:
    """The closed fences of LINES in order; a fence never closed is not one (the text after it is prose)."""
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(lines):
        if lines[index].startswith(_FENCE):
            closing = next((j for j in range(index + 1, len(lines)) if lines[j].startswith(_FENCE)), None)
            if closing is None:
                break
            spans.append((index, closing))
            index = closing + 1
        else:
            index += 1
    fences = []
    for number, (opening, closing) in enumerate(spans):
        words = lines[opening][len(_FENCE) :].split()
        next_opening = spans[number + 1][0] if number + 1 < len(spans) else None
        between = [lines[closing][len(_FENCE) :], *lines[closing + 1 : next_opening]] if next_opening else ["x"]
        fences.append(
            Fence(
                language=words[0] if words else "",
                markers=tuple(words[1:]),
                body="\n".join(lines[opening + 1 : closing]),
                line=opening + 1,
                closing_line=closing + 1,
                followed_closely=not any(part.strip() for part in between),
            )
        )
    return fences


def unclosed_fence(lines: Sequence[str]) -> tuple[int, str] | None:
    """The 1-based line and the language word ("" for none) of the fence LINES open and never close (the last one,
    since fences pair in order: scan_fences reads it as prose); None when every fence is closed."""
    opening = None
    for number, text in enumerate(lines, 1):
        if text.startswith(_FENCE):
            opening = number if opening is None else None
    if opening is None:
        return None
    words = lines[opening - 1][len(_FENCE) :].split()
    return opening, words[0] if words else ""


def heading_above(lines: Sequence[str], fences: Sequence[Fence], line: int) -> str | None:
    """The text of the nearest Markdown heading above LINE (1-based), outside fences."""
    inside = {number for fence in fences for number in range(fence.line, fence.closing_line + 1)}
    for number in range(line - 1, 0, -1):
        text = lines[number - 1]
        if number not in inside and text.startswith("#"):
            return text.lstrip("#").strip() or None
    return None


def timeout_by_kind(command: str, rules: Sequence[TimeoutRule], default_s: float) -> float:
    """The limit of the first rule whose text COMMAND holds, else DEFAULT_S."""
    return next((rule.timeout_s for rule in rules if rule.contains in command), default_s)


def full_width_fence(fence: Fence, file: str, consequences: Mapping[str, str]) -> Problem | None:
    """A problem for FENCE when its language word is one of CONSEQUENCES' words typed in full-width characters
    (capitals too), as an input method gives them: that word's consequence, and the fence's opening in ASCII."""
    typed = ascii_form(fence.language)
    meant = typed.lower()
    if typed == fence.language or meant not in consequences:
        return None
    opening = " ".join([meant, *(ascii_form(marker) for marker in fence.markers)])
    return Problem(file, fence.line, full_width_language(fence.language, opening, consequences[meant]))
