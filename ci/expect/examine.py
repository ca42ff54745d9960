"""A mismatch examined: the line to blame, the diff hunk around it read from the output, and the report of both.

The output is read in bounded windows, however large it is: the hunk is
aligned on a window that starts a few lines before the line blamed, at a place
the matcher went through (or, for the last piece of the body, which must end
the output, on the start and end of what is left, the middle folded away).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ci.base import frozen
from ci.base.text import Masker, human_size, masked_to_show_hidden, policy, show_hidden, without_hidden
from ci.expect.diff import CONTEXT_LINES, SHOWN_CHANGES, Gap, Item, Op, Pattern, align, hunk
from ci.expect.match import DEFAULT_WILDCARD, Blame, Location, locate, matches, piece_offsets, split_pieces
from ci.expect.searchable import WINDOW_BYTES, MemoryText, Searchable, open_output
from ci.record.outcome import Divergence, MatchReport

__all__ = [
    "SHOWN_END_LINES",
    "SHOWN_WHOLE_LINES",
    "Examined",
    "cut_line",
    "examine",
    "examine_file",
    "examine_text",
    "explain_mismatch",
    "head_and_tail_lines",
]

SHOWN_WHOLE_LINES = 24  # a mismatch shows an expected body or an output of up to this many lines whole ...
SHOWN_END_LINES = 10  # ... else this many of its first and of its last lines
_SHOWN_LINE_CHARS = 400  # of one line, a mismatch view shows at most this much
_READ_BYTES = 64 * 1024  # of output, a window reads at most this much at each end
_LONG_LINE_KEPT = 4096  # of a line longer than a read, the view keeps this much (it shows _SHOWN_LINE_CHARS)
_WINDOW_KEPT = 4 * _READ_BYTES  # reading lines for a window stops once it keeps this much text
_AFTER_EXPECTED = 40  # expected lines a window holds after the one blamed
_AFTER_ACTUAL = 80  # output lines a window holds past those it pairs with the expected lines before the blamed one
_END_EXPECTED = 100  # a failed last piece longer than this is aligned from its start only
_WHOLE_ACTUAL = 200  # what is left of the output after the anchor, up to this many lines, is aligned whole
_HEAD_ACTUAL = 20  # else its first lines, a gap, and its last lines
# blanks that look like a plain space, or like nothing: no-break, wide, thin and zero-width spaces, a BOM


@frozen
class Examined:
    """A mismatch: the line blamed, and the hunk around it as the log shows it (masked, hidden bytes written out)."""

    blame: Blame
    hunk: tuple[str, ...]


class _LineStart(str):
    """The start of an output line longer than one read, and how much of the line is left unread after it."""

    unread: int = 0  # in the output's offsets: characters, or bytes (`in_bytes`)
    size: int = 0  # the whole line's, in the same
    in_bytes: bool = False


def cut_line(line: str, limit: int = _SHOWN_LINE_CHARS) -> str:
    """LINE cut to LIMIT characters for a mismatch view, saying how much is left out."""
    return line if len(line) <= limit else f"{line[:limit]} [... {len(line) - limit} more characters]"


def _cut_start(line: str, start: str, limit: int = _SHOWN_LINE_CHARS) -> str:
    """LINE (as shown) cut as `cut_line` does; when it shows START, the start of a longer line, the rest counted too."""
    if not isinstance(start, _LineStart):
        return cut_line(line, limit)
    if start.in_bytes:
        return f"{line[:limit]} [... the whole line is {human_size(start.size)}]"
    return f"{line[:limit]} [... {max(len(line) - limit, 0) + start.unread} more characters]"


def head_and_tail_lines(text: str) -> tuple[str, str, int]:
    """TEXT as a mismatch shows it: its first lines (all of it when short), its last lines (else ""), its line count.

    Long lines are cut (`cut_line`). Reads only the ends of TEXT, however long it is.
    """
    total = text.count("\n") + 1
    if total <= SHOWN_WHOLE_LINES:
        return "\n".join(cut_line(line) for line in text.split("\n")), "", total
    head_end = -1
    for _ in range(SHOWN_END_LINES):
        head_end = text.index("\n", head_end + 1)
    tail_start = len(text)
    for _ in range(SHOWN_END_LINES):
        tail_start = text.rindex("\n", 0, tail_start)
    head = "\n".join(cut_line(line) for line in text[:head_end].split("\n"))
    tail = "\n".join(cut_line(line) for line in text[tail_start + 1 :].split("\n"))
    return head, tail, total


def _pattern(line: str, tokens: Sequence[str]) -> Pattern:
    pieces = split_pieces(line, tokens)
    if len(pieces) == 1:
        return Pattern(line, (), whole=False, open_start=False, open_end=False)
    offsets = piece_offsets(line, pieces, tokens)
    used = tuple(dict.fromkeys(line[offsets[k] + len(pieces[k]) : offsets[k + 1]] for k in range(len(pieces) - 1)))
    whole = not any(pieces)
    return Pattern(line, used, whole=whole, open_start=not pieces[0], open_end=not pieces[-1])


def _line_matches(line: str, pattern: Pattern) -> bool:
    return line == pattern.text if not pattern.tokens else matches(line, pattern.text, pattern.tokens)


def _place(text: Searchable[Any], body: str, offsets: Sequence[int], location: Location, line: int) -> int:
    """Where line LINE of the body (0-based) starts in the output, as the matcher placed it.

    Lines up to the one the failed piece starts in are placed by the pieces
    before it (each newline of the body is in a piece: no wildcard holds one);
    a line further into the failed piece by the part of it that was found
    (past that, where the output ends).
    """
    index = location.piece
    first = body.count("\n", 0, offsets[index])  # the line the failed piece starts in
    if line > first:
        within = line - first
        piece_lines = location.pieces[index].split("\n")
        if within > location.found:
            return text.size
        return location.found_at + text.length("\n".join(piece_lines[:within]) + "\n")
    newline_at = -1  # the newline that ends the line before
    for _ in range(line):
        newline_at = body.index("\n", newline_at + 1)
    if newline_at < 0:
        return 0
    holder = max(k for k in range(index) if offsets[k] <= newline_at)
    return location.starts[holder] + text.length(body[offsets[holder] : newline_at + 1])


def _anchor_line(body: str, offsets: Sequence[int], location: Location) -> int:
    """Where the window starts: the line of the body (0-based) CONTEXT_LINES before the one blamed, or the nearest placed.

    A line of the failed piece is placed by where the part of it found was
    found first, unless it is the last piece: it must end the output, so a
    line or two of it found first need not be where it belongs; the window
    then starts where the piece does.
    """
    index, pieces = location.piece, location.pieces
    first = body.count("\n", 0, offsets[index])
    target = max(location.blame.line - 1 - CONTEXT_LINES, 0)
    if target <= first:
        return target
    step = min(target - first, location.found)
    trusted = index < len(pieces) - 1 or location.found >= 2 or location.blame.divergence is Divergence.EXTRA
    return first + step if step >= 1 and (trusted or index == 0) else first


def _lines_from(text: Searchable[Any], start: int, end: int, limit: int) -> tuple[list[str], int]:
    """Up to LIMIT lines of the output from START (a line's start) to END, and where the line after them starts.

    Read a bounded piece at a time, at most _WINDOW_KEPT of text kept: a line longer than a read is one line, of
    which only the start is kept.
    """
    lines: list[str] = []
    kept = 0
    while len(lines) < limit and start < end and kept < _WINDOW_KEPT:
        read, start = _read_lines(text, start, end, limit - len(lines))
        lines += read
        kept += sum(len(line) for line in read)
    return lines, start


def _read_lines(text: Searchable[Any], start: int, end: int, limit: int) -> tuple[list[str], int]:
    """`_lines_from` in one read: the lines it holds whole, or the start of a line longer than it."""
    raw = text.read(start, min(end - start, _READ_BYTES))
    newline = text.encode("\n")
    parts = raw.split(newline)
    if start + len(raw) < end:  # its last line goes on past what was read
        if len(parts) == 1:  # one line longer than a read: its start, and where the line after it starts
            newline_at = text.find_encoded(newline, start + len(raw))
            line_end = end if newline_at == -1 or newline_at >= end else newline_at
            line = _LineStart(text.decode(raw[:_LONG_LINE_KEPT]))
            line.unread = line_end - start - min(len(raw), _LONG_LINE_KEPT)
            line.size, line.in_bytes = line_end - start, isinstance(raw, bytes)
            return [line], min(line_end + len(newline), end)
        parts = parts[:-1]
    parts = parts[:limit]
    reached = start + sum(len(part) + len(newline) for part in parts)
    return [text.decode(part) for part in parts], min(reached, end)


def _line_start(text: Searchable[Any], offset: int, low: int) -> int:
    """Where the line holding OFFSET starts (LOW, a line's start, at the earliest), read back a bounded piece at a time."""
    newline = text.encode("\n")
    while offset > low:
        begin = max(low, offset - _READ_BYTES)
        found: int = text.read(begin, offset - begin).rfind(newline)
        if found != -1:
            return begin + found + len(newline)
        offset = begin
    return low


def _lines_before(text: Searchable[Any], end: int, low: int, limit: int) -> tuple[list[str], int]:
    """The last LIMIT lines of the output before END, none starting before LOW (a line's start), and where they start."""
    begin = max(low, end - _READ_BYTES)
    if begin >= end:
        return [], end
    raw = text.read(begin, end - begin)
    newline = text.encode("\n")
    parts = raw.split(newline)
    if begin > low and len(parts) == 1:  # all that was read is the end of one long line: shown from its start
        start = _line_start(text, begin, low)
        return _read_lines(text, start, end, 1)[0], start
    if begin > low:  # the first line began before what was read
        begin += len(parts[0]) + len(newline)
        parts = parts[1:]
    kept = parts[-limit:]
    skipped = parts[: len(parts) - len(kept)]
    return [text.decode(part) for part in kept], begin + sum(len(part) + len(newline) for part in skipped)


def _span(text: Searchable[Any], start: int, end: int, tail_lines: int) -> list[Item]:
    """The output lines from START to END (where a line ends): all of them, or the first and last with a gap between."""
    if start == end:
        return [""]
    total = text.count_lines(start, end) + 1
    if total <= _WHOLE_ACTUAL:
        lines, reached = _lines_from(text, start, end, total)
        if reached >= end:
            return list(lines)
    head, head_end = _lines_from(text, start, end, _HEAD_ACTUAL)
    tail, tail_at = _lines_before(text, end, head_end, tail_lines)
    gap = text.count_lines(head_end, tail_at)
    return [*head, *([Gap(gap)] if gap else []), *tail]


def _aligned(
    text: Searchable[Any], body_lines: list[str], tokens: Sequence[str], location: Location, anchor: tuple[int, int]
) -> tuple[list[Pattern], list[Item], list[Op], bool]:
    """The body from the anchor aligned with the output from there; whether more output follows the window.

    The last piece must end the output: when what is left of the body is short,
    the window runs to the end of both (the output's middle folded into a gap).
    Else the window holds some lines past the one blamed; a piece followed by a
    wildcard may have its later lines anywhere further on, as may the output.
    """
    line, at = anchor
    end = text.content_end()
    blamed = location.blame.line - 1
    last = location.piece == len(location.pieces) - 1
    if last and len(body_lines) - line <= _END_EXPECTED:
        expected = [_pattern(each, tokens) for each in body_lines[line:]]
        items = _span(text, at, end, len(expected) + _AFTER_ACTUAL) if at < end else []
        return expected, items, align(expected, items, _line_matches), False
    expected = [_pattern(each, tokens) for each in body_lines[line : blamed + _AFTER_EXPECTED]]
    lines, reached = _lines_from(text, at, end, blamed - line + _AFTER_ACTUAL)
    window: list[Item] = list(lines)
    expected_cut = not last or line + len(expected) < len(body_lines)
    cut = reached < end
    ops = align(expected, window, _line_matches, expected_cut=expected_cut, actual_cut=cut, placed=blamed - line + 1)
    return expected, window, ops, cut


def _found_then_change(
    text: Searchable[Any],
    body_lines: list[str],
    tokens: Sequence[str],
    location: Location,
    anchor: tuple[int, int],
    blamed_at: int,
) -> tuple[list[Pattern], list[Item], list[Op]]:
    """The lines the matcher placed before the one blamed (aligned to fold what wildcards took), then the change
    there, as the matcher saw it: the output goes on after the last line, or a first piece (which starts the
    output) has another line there, or none."""
    line, at = anchor
    blame = location.blame
    blamed = blame.line - 1
    newline = text.length("\n")
    extra = blame.divergence is Divergence.EXTRA
    if extra:
        context_end = location.found_at + text.length(location.pieces[location.piece])
    else:
        # the newline before the line blamed; where the output ends, when it ends before that line
        context_end = text.content_end() if blamed_at >= text.content_end() else blamed_at - newline
    context = [_pattern(each, tokens) for each in body_lines[line : blamed + extra]]
    items = _span(text, at, context_end, CONTEXT_LINES) if context else []
    ops = align(context, items, _line_matches)
    expected = [*context, *([] if extra else [_pattern(body_lines[blamed], tokens)])]
    if extra:
        total = blame.more_lines + 1  # what a hunk shows of a change: the rest is said in one line
        count = total if total <= SHOWN_CHANGES else SHOWN_CHANGES - 1
        shown, _ = _lines_from(text, context_end + newline, text.content_end(), count)
        more = total - len(shown)
        added: list[Item] = [*shown, *([Gap(more)] if more > 0 else [])]
        ops += [Op("+", None, len(items) + k, 1) for k in range(len(added))]
        return expected, items + added, ops
    if blame.divergence is Divergence.DIFFERS:
        return expected, [*items, blame.actual_line], [*ops, Op("/", len(context), len(items), 1)]
    return expected, items, [*ops, Op("-", len(context), len(items), 0)]


def _shown(masker: Masker) -> Callable[[str], str]:
    """How a line of the hunk is shown: masked, what a log hides and what cannot be seen written out, cut.

    Masked here, not by the writers: a line is cut, and what a log hides is written out, which a writer's masking
    could no longer see through."""
    from ci.expect.visible import show_invisible  # a hunk is made for a mismatch only

    def show(line: str) -> str:
        # the kept start of a long line may end in the start of a secret whose rest is unread: never shown
        kept = line[: masker.partial_secret_start(line)] if isinstance(line, _LineStart) else line
        return _cut_start(show_invisible(show_hidden(masked_to_show_hidden(kept, masker))), line)

    return show


def examine(
    text: Searchable[Any], body: str, tokens: Sequence[str], *, masker: Masker | None = None
) -> Examined | None:
    """None when the output matches `body`, else the blame and the hunk around the line blamed, its lines masked by
    MASKER (default: the run's policy)."""
    location = locate(text, body, tokens)
    if location is None:
        return None
    blame = location.blame
    body_lines = body.split("\n")
    offsets = piece_offsets(body, location.pieces, tokens)
    line = _anchor_line(body, offsets, location)
    anchor = (line, _place(text, body, offsets, location, line))
    actual_cut = False
    if blame.divergence is Divergence.EXTRA or location.piece == 0 < len(location.pieces) - 1:
        # what the matcher found is the alignment: a first piece starts the output, the last ended before it
        blamed_at = _place(text, body, offsets, location, blame.line - 1)
        expected, items, ops = _found_then_change(text, body_lines, tokens, location, anchor, blamed_at)
    else:
        expected, items, ops, actual_cut = _aligned(text, body_lines, tokens, location, anchor)
        paired = next((op for op in ops if op.kind == "/" and op.expected == blame.line - 1 - line), None)
        item = items[paired.actual] if paired is not None else None
        if isinstance(item, str) and blame.divergence is Divergence.DIFFERS:  # the line the diff sets against it
            blame = replace(blame, actual_line=item)
    shown = _shown(policy() if masker is None else masker)
    first_actual = text.count_lines(0, anchor[1]) + 1
    lines = hunk(ops, expected, items, shown, first_expected=line + 1, first_actual=first_actual, actual_cut=actual_cut)
    if lines is None:  # the lines match one by one: what differs is a newline, or where a wildcard reaches
        expected_text = shown(body_lines[blame.line - 1])
        lines = {
            Divergence.DIFFERS: ["-" + expected_text, "+" + shown(blame.actual_line)],
            Divergence.MISSING: ["-" + expected_text],
            Divergence.EXTRA: [" " + expected_text, "+" + shown(blame.actual_line)],
        }[blame.divergence]
    return Examined(blame, tuple(lines))


def examine_text(
    actual: str, body: str, tokens: Sequence[str] = (DEFAULT_WILDCARD,), *, masker: Masker | None = None
) -> Examined | None:
    """`examine` on an output held in memory."""
    return examine(MemoryText(actual), body, tokens, masker=masker)


def examine_file(
    path: str, body: str, tokens: Sequence[str], *, masker: Masker | None = None, window_bytes: int = WINDOW_BYTES
) -> Examined | None:
    """`examine` on a stdout file, read a window at a time: the whole output is searched, however large it is."""
    with open(path, "rb") as handle:
        return examine(open_output(handle, body, window_bytes), body, tokens, masker=masker)


def explain_mismatch(
    examined: Examined, body: str, tokens: Sequence[str], *, guide_line: int, masker: Masker | None = None
) -> MatchReport:
    """The report of a mismatch: the line blamed (at GUIDE_LINE in the guide), the hunk, the expected body bounded.

    When the output's line differs from the expected one only in what a log
    hides (carriage returns, escape sequences, other control characters), the
    report keeps it to say so.
    """
    blame = examined.blame
    expected_line = body.split("\n", blame.line)[blame.line - 1]
    hidden_only = (
        blame.divergence is Divergence.DIFFERS
        and matches(without_hidden(blame.actual_line), expected_line, tokens)
        and not matches(blame.actual_line, expected_line, tokens)
    )
    # masked whole before the middle is left out: a secret of several lines leaves none of them
    head, tail, count = head_and_tail_lines((policy() if masker is None else masker).mask(body))
    return MatchReport(
        first_unmatched_line=blame.line,
        first_unmatched_text=expected_line,
        guide_line=guide_line,
        divergence=blame.divergence,
        actual_line=blame.actual_line,
        more_lines=blame.more_lines,
        actual_line_hidden=blame.actual_line if hidden_only else None,
        diff="\n".join(examined.hunk),
        expected_head=head,
        expected_tail=tail,
        expected_lines=count,
    )
