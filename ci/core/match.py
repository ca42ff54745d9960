"""Output checking: match a block's stdout against its expected body in linear time, and say where a mismatch starts."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ci.core.model import MatchReport
from ci.core.searchable import WINDOW_BYTES, MemoryText, Searchable, open_output
from ci.core.text import clean_text, show_hidden, without_hidden

__all__ = [
    "DEFAULT_WILDCARD",
    "Blame",
    "blame_file",
    "blame_text",
    "explain_mismatch",
    "match_file",
    "matches",
    "split_pieces",
]

DEFAULT_WILDCARD = "..."


def split_pieces(body: str, tokens: Sequence[str]) -> list[str]:
    """Split an expected body at its wildcard tokens.

    Scans left to right; where several tokens start at the same place the
    longest wins, so `fuzzy='xx' fuzzy='xxx'` reads `xxx` as one wildcard.
    With no tokens the whole body is one literal piece.
    """
    ordered = sorted({t for t in tokens if t}, key=len, reverse=True)  # an empty token would match nowhere useful
    if not ordered:
        return [body]
    pieces: list[str] = []
    start = 0
    scan = 0
    while True:
        hits = [(body.find(tok, scan), -len(tok), tok) for tok in ordered]
        hits = [h for h in hits if h[0] >= 0]
        if not hits:
            break
        at, _, tok = min(hits)
        pieces.append(body[start:at])
        start = scan = at + len(tok)
    pieces.append(body[start:])
    return pieces


def _match_text(text: Searchable[Any], pieces: Sequence[str]) -> tuple[int, int] | None:
    """None when the text matches, else the index of the first piece that failed and where its search began.

    The reference semantics is a regular expression: the pieces escaped and
    joined by a lazy DOTALL `.*?`, anchored at both ends, followed by `\\n*`.
    Without backtracking: the first piece is a prefix, the last a suffix of the
    output (newlines it ends with may come from the trailing ones), and the
    middle pieces are found leftmost, in order, in between. Leftmost is
    optimal, so this gives the regular expression's verdict in one pass.
    """
    last = pieces[-1]
    core = last.rstrip("\n")
    newlines_needed = len(last) - len(core)
    end = text.content_end()
    trailing = text.size - end
    if len(pieces) == 1:
        whole = end == text.length(core) and (not core or text.has_at(core, 0))
        return None if whole and trailing >= newlines_needed else (0, 0)
    first = pieces[0]
    if not text.has_at(first, 0):
        return 0, 0
    position = text.length(first)
    for index in range(1, len(pieces) - 1):
        piece = pieces[index]
        found = text.find(piece, position) if piece else position
        if found < 0:
            return index, position
        position = found + text.length(piece)
    if not core:
        fits = text.size - position >= newlines_needed and trailing >= newlines_needed
    else:
        start = end - text.length(core)
        fits = trailing >= newlines_needed and start >= position and text.has_at(core, start)
    return None if fits else (len(pieces) - 1, position)


def matches(actual: str, body: str, tokens: Sequence[str] = (DEFAULT_WILDCARD,)) -> bool:
    """True when `actual` matches the expected `body` with these wildcard tokens."""
    return _match_text(MemoryText(actual), split_pieces(body, tokens)) is None


def match_file(path: str, body: str, tokens: Sequence[str], *, window_bytes: int = WINDOW_BYTES) -> int | None:
    """Match a stdout file without reading it into memory: None on a match, else the index of the first piece that failed.

    Reads at most `window_bytes` at a time (more only for a piece that long).
    """
    with open(path, "rb") as handle:
        failed = _match_text(open_output(handle, body, window_bytes), split_pieces(body, tokens))
    return None if failed is None else failed[0]


@dataclass(frozen=True)
class Blame:
    """Where a mismatch starts: the first expected line that could not be matched, and the output there."""

    line: int  # 1-based line of the expected body
    actual_line: str  # the output's line where that expected line was looked for (at most a few KiB of it)


def _line_of_piece(body: str, pieces: Sequence[str], tokens: Sequence[str], index: int) -> int:
    """0-based line in `body` where piece `index` starts."""
    offset = 0
    for i in range(index):
        offset += len(pieces[i])
        # the token that followed piece i: the longest one at that offset
        following = max((t for t in tokens if body.startswith(t, offset)), key=len, default="")
        offset += len(following)
    return body.count("\n", 0, offset)


def _blame(text: Searchable[Any], body: str, tokens: Sequence[str], failed: tuple[int, int]) -> Blame:
    """The blame for a mismatch at piece `failed[0]`, whose search began at `failed[1]`.

    The piece is grown line by line; the first line whose addition makes it
    unfindable (at its place for the first piece, anywhere further on for the
    others) is the one to blame, or its last line when all of it is found. A
    shorter start of the piece is found wherever a longer one is, so a binary
    search needs a few passes over the output, not one per line.
    """
    pieces = split_pieces(body, tokens)
    index, position = failed
    lines = pieces[index].split("\n")

    def start(count: int) -> str:
        """The piece's first `count` lines, with the newline after them when more follow."""
        return "\n".join(lines[:count]) + ("\n" if 0 < count < len(lines) else "")

    found, found_at, missing = 0, position, len(lines) + 1  # start(found) is at found_at; start(missing) is nowhere
    while missing - found > 1:
        middle = (found + missing) // 2
        candidate = start(middle)
        # the first piece must start the output; where a longer start of a piece is, a shorter one is too
        at = (position if text.has_at(candidate, position) else -1) if index == 0 else text.find(candidate, found_at)
        if at < 0:
            missing = middle
        else:
            found, found_at = middle, at
    within = min(found, len(lines) - 1)
    body_lines = body.split("\n")
    line = min(_line_of_piece(body, pieces, tokens, index) + within, len(body_lines) - 1)
    return Blame(line + 1, text.line_around(found_at + text.length(start(within))))


def blame_text(actual: str, body: str, tokens: Sequence[str] = (DEFAULT_WILDCARD,)) -> Blame | None:
    """None when `actual` matches `body`, else where the mismatch starts."""
    text = MemoryText(actual)
    failed = _match_text(text, split_pieces(body, tokens))
    return None if failed is None else _blame(text, body, tokens, failed)


def blame_file(path: str, body: str, tokens: Sequence[str], *, window_bytes: int = WINDOW_BYTES) -> Blame | None:
    """None when the stdout file matches `body`, else where the mismatch starts: `match_file` and `blame_text` in one.

    The whole output is searched, a window at a time, however large it is.
    """
    with open(path, "rb") as handle:
        text = open_output(handle, body, window_bytes)
        failed = _match_text(text, split_pieces(body, tokens))
        return None if failed is None else _blame(text, body, tokens, failed)


def _diff_lines(text: str) -> list[str]:
    """TEXT's lines as the diff shows them: split at line feeds alone, what a log hides written out."""
    return [show_hidden(line) for line in text.split("\n")] if text else []


def explain_mismatch(
    actual: str, body: str, tokens: Sequence[str], blame: Blame, *, limit_chars: int = 200_000
) -> MatchReport:
    """Build the report shown on a mismatch: the diff and the first expected line not matched.

    `actual` may be a bounded view of the output, as decoded (not cleaned for a
    log); the diff is bounded too, so a huge output costs no more than
    `limit_chars`. The diff shows what a log hides (carriage returns, escape
    sequences, other control characters) as escapes, `\\r`, `\\x1b`.
    """
    shown = actual[:limit_chars]
    if len(actual) > limit_chars and "\n" in shown:  # whole lines: a part of a line may be a part of a secret
        shown = shown[: shown.rindex("\n") + 1]
    diff = "\n".join(
        difflib.unified_diff(
            _diff_lines(body[:limit_chars]),
            _diff_lines(shown.rstrip("\n")),
            fromfile="expected",
            tofile="actual",
            lineterm="",
        )
    )
    expected_line = body.split("\n")[blame.line - 1]
    hidden_only = matches(without_hidden(blame.actual_line), expected_line, tokens) and not matches(
        blame.actual_line, expected_line, tokens
    )
    return MatchReport(
        expected=body,
        actual_head=clean_text(shown),
        diff=diff,
        first_unmatched_line=blame.line,
        first_unmatched_text=expected_line,
        actual_line_hidden=blame.actual_line if hidden_only else None,
    )
