"""Output checking: match a block's stdout against its expected body in linear time, and say where a mismatch starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ci.base import frozen
from ci.expect.searchable import WINDOW_BYTES, MemoryText, Searchable, open_output
from ci.guide.model import DEFAULT_WILDCARD
from ci.record.outcome import Divergence

__all__ = [
    "DEFAULT_WILDCARD",
    "Blame",
    "Location",
    "blame_file",
    "blame_text",
    "locate",
    "match_file",
    "matches",
    "piece_offsets",
    "split_pieces",
]


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


def _match_text(
    text: Searchable[Any], pieces: Sequence[str], starts: list[int] | None = None
) -> tuple[int, int] | None:
    """None when the text matches, else the index of the first piece that failed and where its search began.

    STARTS, when given, gets where each piece before the one that failed was found.

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
    found_at = [0]
    position = text.length(first)
    for index in range(1, len(pieces) - 1):
        piece = pieces[index]
        found = text.find(piece, position) if piece else position
        if found < 0:
            if starts is not None:
                starts += found_at
            return index, position
        found_at.append(found)
        position = found + text.length(piece)
    if starts is not None:
        starts += found_at
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


@frozen
class Blame:
    """Where a mismatch starts: the first expected line that cannot match, and what the output has there."""

    line: int  # 1-based line of the expected body (as matched, after substitution)
    divergence: Divergence  # the output has another line there, has none left, or goes on after the last
    # DIFFERS: the output's line where that line was looked for; EXTRA: the first line past the last expected
    # one; MISSING: "" (at most a few KiB of a line)
    actual_line: str
    more_lines: int = 0  # EXTRA: how many output lines follow actual_line


@frozen
class Location:
    """A blame, and where the matcher was when it failed: what the mismatch view starts from."""

    blame: Blame
    pieces: tuple[str, ...]  # the body split at its wildcards
    piece: int  # the piece that failed
    starts: tuple[int, ...]  # where each piece before it was found in the output (in its own offsets)
    found: int  # how many of the failed piece's lines were found (with the newline after them when more follow)...
    found_at: int  # ... and where: the first place for a later piece, its own place for the first


def piece_offsets(body: str, pieces: Sequence[str], tokens: Sequence[str]) -> list[int]:
    """Where each piece starts in `body`: after the pieces and wildcard tokens before it."""
    offsets = []
    offset = 0
    for piece in pieces:
        offsets.append(offset)
        offset += len(piece)
        # the token that follows the piece: the longest one there, as split_pieces read it
        offset += len(max((t for t in tokens if t and body.startswith(t, offset)), key=len, default=""))
    return offsets


def _blame(
    text: Searchable[Any], body: str, tokens: Sequence[str], pieces: Sequence[str], failed: tuple[int, int]
) -> tuple[Blame, int, int]:
    """The blame for a mismatch at piece `failed[0]`, whose search began at `failed[1]`; how much of it was found, where.

    The piece is grown line by line (a shorter start of a piece is found
    wherever a longer one is, so a binary search needs a few passes over the
    output, not one per line). The first line whose addition makes it
    unfindable (at its place for the first piece, anywhere further on for the
    others) is to blame, unless the output ends before it: then the first line
    with nothing left to match it. When all of it is found (the last piece,
    not at the end), the last line is to blame and what follows is extra.
    """
    index, position = failed
    lines = pieces[index].split("\n")

    def start(count: int) -> str:
        """The piece's first `count` lines, with the newline after them when more follow."""
        return "\n".join(lines[:count]) + ("\n" if 0 < count < len(lines) else "")

    def located(candidate: str, after: int) -> int:
        """Where the candidate is: the first piece starts the output; a later one is anywhere from AFTER on."""
        if index == 0:
            return position if text.has_at(candidate, position) else -1
        return text.find(candidate, after)

    found, found_at, missing = 0, position, len(lines) + 1  # start(found) is at found_at; start(missing) is nowhere
    while missing - found > 1:
        middle = (found + missing) // 2
        at = located(start(middle), found_at)  # where a longer start of a piece is, a shorter one is too
        found, found_at, missing = (found, found_at, middle) if at < 0 else (middle, at, missing)
    end = text.content_end()
    newline = text.encode("\n")
    if found == len(lines):  # the whole (last) piece is there, but not at the end
        after = found_at + text.length(pieces[index])
        within = found - 1
        if text.read(after, len(newline)) == newline:
            extra = after + len(newline)
            blame = Blame(0, Divergence.EXTRA, text.line_around(extra), text.count_lines(extra, end))
        else:  # the output's line goes on past the expected one
            blame = Blame(0, Divergence.DIFFERS, text.line_around(after))
    else:
        within = found
        at = found_at + text.length(start(found))
        ends = at >= end  # from where the line was looked for, nothing but the newlines an output may end with
        if index > 0 and found == 0 and not lines[0]:  # no newline after the wildcard: its line runs to the end
            within, ends = 1, True
        elif found + 1 < len(lines):
            whole_line = "\n".join(lines[: found + 1])  # the line found, but not the newline after it
            line_at = text.size - text.length(whole_line)
            if (line_at == position if index == 0 else line_at >= position) and text.has_at(whole_line, line_at):
                within, ends = found + 1, True  # the output ends with that line: the next has nothing to match it
        blame = Blame(0, Divergence.MISSING, "") if ends else Blame(0, Divergence.DIFFERS, text.line_around(at))
    offset = piece_offsets(body, pieces, tokens)[index]
    line = min(body.count("\n", 0, offset) + within, body.count("\n"))
    return Blame(line + 1, blame.divergence, blame.actual_line, blame.more_lines), found, found_at


def locate(text: Searchable[Any], body: str, tokens: Sequence[str]) -> Location | None:
    """None when the output matches `body`, else the blame and where the matcher failed."""
    pieces = split_pieces(body, tokens)
    starts: list[int] = []
    failed = _match_text(text, pieces, starts)
    if failed is None:
        return None
    blame, found, found_at = _blame(text, body, tokens, pieces, failed)
    return Location(blame, tuple(pieces), failed[0], tuple(starts), found, found_at)


def blame_text(actual: str, body: str, tokens: Sequence[str] = (DEFAULT_WILDCARD,)) -> Blame | None:
    """None when `actual` matches `body`, else where the mismatch starts."""
    location = locate(MemoryText(actual), body, tokens)
    return None if location is None else location.blame


def blame_file(path: str, body: str, tokens: Sequence[str], *, window_bytes: int = WINDOW_BYTES) -> Blame | None:
    """None when the stdout file matches `body`, else where the mismatch starts: `match_file` and `blame_text` in one.

    The whole output is searched, a window at a time, however large it is.
    """
    with open(path, "rb") as handle:
        location = locate(open_output(handle, body, window_bytes), body, tokens)
    return None if location is None else location.blame
