"""Output checking: match a block's stdout against its expected body in linear time."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from ci.core.model import MatchReport
from ci.core.searchable import WINDOW_BYTES, MemoryText, Searchable, open_output

__all__ = ["DEFAULT_WILDCARD", "explain_mismatch", "match_file", "matches", "split_pieces"]

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


def _line_of_piece(body: str, pieces: Sequence[str], tokens: Sequence[str], index: int) -> int:
    """0-based line in `body` where piece `index` starts."""
    offset = 0
    for i in range(index):
        offset += len(pieces[i])
        # the token that followed piece i: the longest one at that offset
        following = max((t for t in tokens if body.startswith(t, offset)), key=len, default="")
        offset += len(following)
    return body.count("\n", 0, offset)


def _failing_line_in_piece(actual: str, piece: str, position: int, anchored: bool) -> int:
    """0-based line of `piece` at which it stops being found in `actual` from `position`.

    Grows the piece line by line; the first line whose addition makes it
    unfindable is the one to blame (at the start for the anchored prefix,
    anywhere further on for the other pieces).
    """
    lines = piece.split("\n")
    for count in range(1, len(lines) + 1):
        candidate = "\n".join(lines[:count]) + ("\n" if count < len(lines) else "")
        found = actual.startswith(candidate, position) if anchored else actual.find(candidate, position) >= 0
        if not found:
            return count - 1
    return len(lines) - 1


def explain_mismatch(
    actual: str, body: str, tokens: Sequence[str], failed_piece: int, *, limit_chars: int = 200_000
) -> MatchReport:
    """Build the report shown on a mismatch: the diff and the first expected line not matched.

    `actual` may be a bounded view of the output; the diff is bounded too, so a
    huge output costs no more than `limit_chars`.
    """
    pieces = split_pieces(body, tokens)
    position = 0
    for index in range(failed_piece):
        found = actual.find(pieces[index], position) if index else 0
        position = max(found, 0) + len(pieces[index])
    piece = pieces[failed_piece]
    within = _failing_line_in_piece(actual, piece, position, anchored=failed_piece == 0)
    body_lines = body.split("\n")
    start_line = min(_line_of_piece(body, pieces, tokens, failed_piece) + within, len(body_lines) - 1)
    shown = actual[:limit_chars]
    if len(actual) > limit_chars and "\n" in shown:  # whole lines: a part of a line may be a part of a secret
        shown = shown[: shown.rindex("\n") + 1]
    diff = "\n".join(
        difflib.unified_diff(
            body[:limit_chars].splitlines(),
            shown.splitlines(),
            fromfile="expected",
            tofile="actual",
            lineterm="",
        )
    )
    return MatchReport(
        expected=body,
        actual_head=shown,
        diff=diff,
        first_unmatched_line=start_line + 1,
        first_unmatched_text=body_lines[start_line],
    )
