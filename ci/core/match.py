"""Output checking: match a block's stdout against its expected body in linear time."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from typing import BinaryIO

from ci.core.model import MatchReport

__all__ = ["DEFAULT_WILDCARD", "explain_mismatch", "match_file", "matches", "split_pieces"]

DEFAULT_WILDCARD = "..."

# What can be searched in memory: a str or bytes.
Haystack = str | bytes


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


class _MemoryText:
    """An output held in memory (str or bytes), behind the same interface as a file."""

    def __init__(self, text: Haystack) -> None:
        self.text = text
        self.size = len(text)
        self.newline: str | bytes = "\n" if isinstance(text, str) else b"\n"

    def read(self, start: int, length: int) -> Haystack:
        return self.text[start : start + length]

    def find(self, piece: str | bytes, start: int) -> int:
        return self.text.find(piece, start)  # type: ignore[arg-type]  # piece and text are both str or both bytes

    def content_end(self) -> int:
        return len(self.text.rstrip(self.newline))  # type: ignore[arg-type]  # newline has the text's type


def _match_text(text: _MemoryText | _FileText, pieces: Sequence[str | bytes]) -> int | None:
    """Return None when the text matches, else the index of the first piece that failed.

    The reference semantics is a regular expression: the pieces escaped and
    joined by a lazy DOTALL `.*?`, anchored at both ends, followed by `\n*`.
    Without backtracking: the first piece is a prefix, the last a suffix of the
    output (newlines it ends with may come from the trailing ones), and the
    middle pieces are found leftmost, in order, in between. Leftmost is
    optimal, so this gives the regular expression's verdict in one pass.
    """
    newline = text.newline
    last = pieces[-1]
    core = last.rstrip(newline)  # type: ignore[arg-type]  # pieces and newline share the output's type
    newlines_needed = len(last) - len(core)
    end = text.content_end()
    trailing = text.size - end
    if len(pieces) == 1:
        whole = end == len(core) and (not core or text.read(0, end) == core)
        return None if whole and trailing >= newlines_needed else 0
    first = pieces[0]
    if text.read(0, len(first)) != first:
        return 0
    position = len(first)
    for index in range(1, len(pieces) - 1):
        piece = pieces[index]
        found = text.find(piece, position) if piece else position
        if found < 0:
            return index
        position = found + len(piece)
    if not core:
        fits = text.size - position >= newlines_needed and trailing >= newlines_needed
    else:
        start = end - len(core)
        fits = trailing >= newlines_needed and start >= position and text.read(start, len(core)) == core
    return None if fits else len(pieces) - 1


def matches(actual: str, body: str, tokens: Sequence[str] = (DEFAULT_WILDCARD,)) -> bool:
    """True when `actual` matches the expected `body` with these wildcard tokens."""
    return _match_text(_MemoryText(actual), split_pieces(body, tokens)) is None


class _FileText:
    """The bytes of a stdout file, searched in bounded chunks so memory stays small."""

    newline = b"\n"

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self.handle = handle
        self.size = size

    def read(self, start: int, length: int) -> bytes:
        self.handle.seek(start)
        return self.handle.read(length)

    def content_end(self) -> int:
        """Size without trailing newlines."""
        end = self.size
        while end > 0:
            chunk = self.read(max(end - _CHUNK_BYTES, 0), min(_CHUNK_BYTES, end))
            stripped = chunk.rstrip(b"\n")
            end -= len(chunk) - len(stripped)
            if stripped:
                return end
        return 0

    def find(self, piece: str | bytes, start: int) -> int:
        """Offset of the first `piece` (bytes) at or after `start`, else -1."""
        assert isinstance(piece, bytes)
        chunk_bytes = _FIRST_CHUNK_BYTES
        offset = start
        buffer = b""
        while offset + len(buffer) < self.size:
            buffer += self.read(offset + len(buffer), chunk_bytes)
            found = buffer.find(piece)
            if found >= 0:
                return offset + found
            keep = len(piece) - 1
            if len(buffer) > keep:
                offset += len(buffer) - keep
                buffer = buffer[len(buffer) - keep :] if keep else b""
            chunk_bytes = min(chunk_bytes * 2, _CHUNK_BYTES)
        return -1


_FIRST_CHUNK_BYTES = 64 * 1024  # pieces usually sit close together: start small
_CHUNK_BYTES = 1024 * 1024  # larger chunks measured slower (bench/matching.py)


def match_file(path: str, body: str, tokens: Sequence[str]) -> int | None:
    """Match a stdout file without reading it into memory.

    Returns None on a match, else the index of the first piece that failed.
    Works on bytes: UTF-8 is self-synchronising, so a byte-level search finds
    exactly the character-level matches. A body holding U+FFFD could match a
    replaced invalid byte, so that rare case decodes the whole output first.
    """
    pieces = split_pieces(body, tokens)
    if "\ufffd" in body:
        with open(path, "rb") as handle:
            return _match_text(_MemoryText(handle.read().decode("utf-8", errors="replace")), pieces)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        return _match_text(_FileText(handle, size), [p.encode("utf-8") for p in pieces])


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
