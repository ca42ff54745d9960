"""Rewriting an expected body to match new output, keeping every wildcard and placeholder that still fits (pure).

The aligner serves two readings of an expected body: the matcher's, where the
body is the whole output and its wildcard tokens stand for any text
(updated_body, here), and the plain-fence dialect's search, where the body is
an excerpt found anywhere in the output (ci.maintain.excerpt), each with a
Grammar and the Costs of its steps.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from ci.base import frozen
from ci.expect.match import matches, split_pieces
from ci.guide.placeholders import substitute

__all__ = [
    "MAX_ALIGN_CELLS",
    "MAX_INTRA_LINE_CHARS",
    "BodyLine",
    "CannotRewrite",
    "Costs",
    "Grammar",
    "body_line",
    "rewritten_lines",
    "updated_body",
]

MAX_ALIGN_CELLS = 5_000_000  # body lines x output lines the alignment may visit (about 2 s, 80 MB)
MAX_INTRA_LINE_CHARS = 2_000  # longer lines are replaced whole instead of aligned character by character

# Costs of the line alignment. Deleting a body line costs more than replacing
# it, so a changed line next to a wildcard line is rewritten, not dropped while
# the wildcard swallows its new text.
_REPLACE_COST, _INSERT_COST, _DELETE_COST = 2, 2, 3
_INFINITY = 1 << 60


class CannotRewrite(Exception):
    """One `#test-result` body cannot be rewritten safely; the message says why. The guide's others still can be."""


class _Wildcard:
    """One wildcard occurrence of a body line; equal to nothing, so the differ never pairs it with text."""

    def __init__(self, token: str, *, frame: bool = False) -> None:
        self.token = token
        self.frame = frame  # put around the line by its excerpt (BodyLine.before, .after), not written in it


@frozen
class Grammar:
    """How an expected body reads: where its wildcards are, what they take, and how output is written back in it."""

    split: Callable[[str], Iterable[tuple[bool, str]]]  # a line's (is_wildcard, text) runs, cut as its checker cuts it
    spans: Callable[[str], bool]  # whether a wildcard takes any text, line breaks too (a line of them: whole lines)
    fits: Callable[[str, str], bool]  # (output line, line after substitution): whether the line matches it whole
    literal: Callable[[str], str]  # an output line as a body line that matches it


def _matcher_grammar(tokens: Sequence[str]) -> Grammar:
    """The matcher's (ci.expect.match): wildcard TOKENS, any text each; an output line matches itself as it is."""
    return Grammar(
        split=lambda text: _token_split(text, tokens),
        spans=lambda _token: True,
        fits=lambda output, pattern: matches(output, pattern, tokens),
        literal=lambda line: line,
    )


@frozen
class BodyLine:
    """One line of the old body, and how it may be aligned with output lines."""

    text: str  # as written: load placeholders in place
    pattern: str  # after substitution: what the matcher compares
    only_wildcards: bool  # nothing but wildcards that span lines: stands for one or more whole lines
    leading: bool  # starts with a wildcard that spans lines: may also take the output lines before the one it matches
    trailing: bool  # ends with a wildcard that spans lines: may also take the output lines after the one it matches
    literal: bool  # no wildcard at all: matches one equal line
    bare: bool  # nothing but wildcards and blanks: where it is kept says nothing of where the body stands
    words: str  # after substitution, without BEFORE and AFTER: what a changed line's likeness is measured on
    before: str = ""  # a wildcard the pattern starts with that the text does not (an excerpt's first line)
    after: str = ""  # a wildcard the pattern ends with that the text does not (an excerpt's last line)


def _token_split(text: str, tokens: Sequence[str]) -> Iterator[tuple[bool, str]]:
    """Split text into (is_wildcard, text) runs, cut where the matcher cuts it (split_pieces)."""
    pieces = split_pieces(text, tokens)
    offset = 0
    for index, piece in enumerate(pieces):
        if piece:
            yield False, piece
        offset += len(piece)
        if index < len(pieces) - 1:  # a token follows: the longest one starting here, as split_pieces read it
            token = max((t for t in tokens if t and text.startswith(t, offset)), key=len)
            yield True, token
            offset += len(token)


def body_line(text: str, values: Mapping[str, str], grammar: Grammar, *, before: str = "", after: str = "") -> BodyLine:
    """TEXT as a line to align; BEFORE and AFTER (wildcards) are put around its pattern, not its text."""
    pattern = before + substitute(text, tuple(values.items())) + after
    runs = list(grammar.split(pattern))
    spanning = [is_wild and grammar.spans(run) for is_wild, run in runs]
    return BodyLine(
        text=text,
        pattern=pattern,
        only_wildcards=bool(runs) and all(spanning),
        leading=bool(runs) and spanning[0],
        trailing=bool(runs) and spanning[-1],
        literal=not any(is_wild for is_wild, _ in runs),
        bare=not any(run.strip() for is_wild, run in runs if not is_wild),
        words=pattern[len(before) : len(pattern) - len(after)],
        before=before,
        after=after,
    )


def _fits(line: BodyLine, outputs: Sequence[str], grammar: Grammar) -> list[bool]:
    """Which output lines the body line matches on its own."""
    if line.literal:
        return [out == line.pattern for out in outputs]
    if line.only_wildcards:
        return [True] * len(outputs)
    pieces = [run for is_wild, run in grammar.split(line.pattern) if not is_wild]
    probe = max(pieces, key=len, default="")  # a cheap test first: the line's longest literal piece must be there
    return [probe in out and grammar.fits(out, line.pattern) for out in outputs]


@frozen
class Costs:
    """What the alignment's steps cost; keeping a line that still fits costs nothing."""

    insert: int  # an output line added
    delete: int  # a body line dropped
    replace: Callable[[BodyLine, Sequence[str]], list[int]]  # rewriting the body line from each output line
    free_ends: bool  # the output lines before and after the body's cost nothing (an excerpt, found anywhere)


_WHOLE = Costs(_INSERT_COST, _DELETE_COST, lambda _line, outputs: [_REPLACE_COST] * len(outputs), free_ends=False)

_KEEP, _REPLACE, _DELETE, _INSERT = range(4)  # steps of the alignment


def _align(
    lines: Sequence[BodyLine], outputs: Sequence[str], grammar: Grammar, costs: Costs
) -> list[tuple[int, int, int]]:
    """Align body lines with output lines at the least cost; returns (step, body index, output index).

    Steps: _KEEP (body line i still stands for the output lines from j up to
    the next step), _REPLACE (line i becomes output line j), _DELETE (line i
    is gone), _INSERT (output line j is new). A line that still matches costs
    nothing; a line starting or ending with a wildcard may also cover the
    output lines before or after its match, and a line of nothing but
    wildcards covers one or more lines of any text, as the matcher lets them.
    An edit-distance table, one row per body line; the spans cost one pass per row, carrying the cheapest start
    seen so far. On equal cost a keep wins over a replace, a replace over a delete, a delete over an insert
    (free ends: the output lines around the body's are left out of the steps).
    """
    count = len(outputs)
    above = [0 if costs.free_ends else j * costs.insert for j in range(count + 1)]
    steps_table = [[_INSERT] * (count + 1)]
    sources_table = [[j - 1 for j in range(count + 1)]]
    for line in lines:
        cost = [_INFINITY] * (count + 1)
        steps = [_DELETE] * (count + 1)
        sources = list(range(count + 1))
        fits = _fits(line, outputs, grammar)
        replace_cost = costs.replace(line, outputs)
        spans_after = line.trailing or line.only_wildcards
        spans_before = line.leading or line.only_wildcards
        after_start, after_cost = -1, _INFINITY  # cheapest matching start so far: spans after a match
        before_start, before_cost = -1, _INFINITY  # cheapest start so far: spans before a match
        for j in range(count + 1):
            if spans_after and after_cost < cost[j]:
                cost[j], steps[j], sources[j] = after_cost, _KEEP, after_start
            if j == count:
                break
            if above[j] < before_cost:
                before_start, before_cost = j, above[j]
            if fits[j]:
                start, value = (before_start, before_cost) if spans_before else (j, above[j])
                if value < cost[j + 1]:
                    cost[j + 1], steps[j + 1], sources[j + 1] = value, _KEEP, start
                if above[j] < after_cost:
                    after_start, after_cost = j, above[j]
        for j in range(count):
            value = above[j] + replace_cost[j]
            if value < cost[j + 1]:
                cost[j + 1], steps[j + 1], sources[j + 1] = value, _REPLACE, j
        for j in range(count + 1):
            value = above[j] + costs.delete
            if value < cost[j]:
                cost[j], steps[j], sources[j] = value, _DELETE, j
        for j in range(count):
            value = cost[j] + costs.insert
            if value < cost[j + 1]:
                cost[j + 1], steps[j + 1], sources[j + 1] = value, _INSERT, j
        above = cost
        steps_table.append(steps)
        sources_table.append(sources)
    # free ends: the cheapest alignment's end, the latest on equal cost (a changed last line rewritten, not dropped)
    end = min(range(count + 1), key=lambda j: (above[j], -j)) if costs.free_ends else count
    return _cheapest_path(steps_table, sources_table, end, free_ends=costs.free_ends)


def _cheapest_path(
    steps_table: list[list[int]], sources_table: list[list[int]], end: int, *, free_ends: bool
) -> list[tuple[int, int, int]]:
    """Walk the alignment tables back from the last row's cell END: the steps of the cheapest alignment, first to
    last (FREE_ENDS: from the first body line's, the output lines before it left out)."""
    path: list[tuple[int, int, int]] = []
    i, j = len(steps_table) - 1, end
    while i > 0 or (j > 0 and not free_ends):
        step, source = steps_table[i][j], sources_table[i][j]
        path.append((step, i - 1, source))
        if step != _INSERT:
            i -= 1
        j = source
    path.reverse()
    return path


def _intra_line(line: BodyLine, output: str, values: Mapping[str, str], grammar: Grammar) -> str:
    """Rewrite one changed line: keep its wildcards and placeholders where the text around them still fits.

    The wildcards of its frame (before, after) take the output's text around
    what the line stood for, and are left out of the rewritten line.
    """
    if len(output) > MAX_INTRA_LINE_CHARS or len(line.pattern) > MAX_INTRA_LINE_CHARS:
        return grammar.literal(output)
    units: list[str | _Wildcard] = []
    owner: list[int] = []  # per unit: which placeholder occurrence it came from, -1 for none
    occurrences: list[tuple[int, int, str]] = []  # (first unit, end unit, "<PH>")
    names = sorted((f"<{p}>" for p in values), key=len, reverse=True)
    split = re.compile("|".join(re.escape(n) for n in names)) if names else None
    position = 0
    pieces = list(split.finditer(line.text)) if split else []
    if line.before:
        units.append(_Wildcard(line.before, frame=True))
        owner.append(-1)
    for found in [*pieces, None]:
        literal = line.text[position : found.start() if found else len(line.text)]
        for is_wild, text in grammar.split(literal):
            if is_wild:
                units.append(_Wildcard(text))
                owner.append(-1)
            else:
                units.extend(text)
                owner.extend([-1] * len(text))
        if found is None:
            break
        value = values[found.group(0)[1:-1]]
        occurrences.append((len(units), len(units) + len(value), found.group(0)))
        owner.extend([len(occurrences) - 1] * len(value))
        units.extend(value)
        position = found.end()
    if line.after:
        units.append(_Wildcard(line.after, frame=True))
        owner.append(-1)

    parts: list[str] = []
    matcher = difflib.SequenceMatcher(None, units, list(output), autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            unit = i1
            while unit < i2:
                occurrence = owner[unit]
                if occurrence >= 0:
                    start, end, name = occurrences[occurrence]
                    if start == unit and end <= i2:
                        parts.append(name)
                        unit = end
                        continue
                parts.append(output[j1 + unit - i1])
                unit += 1
        elif op == "delete":
            parts.extend(u.token for u in units[i1:i2] if isinstance(u, _Wildcard))
        elif op == "insert":
            parts.append(output[j1:j2])
        else:
            parts.append(_replace_framed(units[i1:i2], output, j1, j2, first=i1 == 0, last=i2 == len(units)))
    rewritten = "".join(parts)
    if not grammar.fits(output, substitute(rewritten, tuple(values.items()))):
        return grammar.literal(output)
    return _unframed(rewritten, line)


def _unframed(rewritten: str, line: BodyLine) -> str:
    """A rewritten line without the wildcards of LINE's frame."""
    if line.before and rewritten.startswith(line.before):
        rewritten = rewritten[len(line.before) :]
    if line.after and rewritten.endswith(line.after):
        rewritten = rewritten[: len(rewritten) - len(line.after)]
    return rewritten


def _replace_framed(old: Sequence[str | _Wildcard], output: str, j1: int, j2: int, *, first: bool, last: bool) -> str:
    """Text for a run of old units the differ replaced by OUTPUT[J1:J2], the wildcards of the line's frame kept at
    its ends (FIRST, LAST: the run starts or ends the line's units).

    A frame's wildcard takes the output's text beside what the line stood for only when the differ gives it that
    text alone, and never the rest of a word the line's text begins or ends: a changed line's new text is written
    whole (`status: ok` becomes `status: failed`, never `status: fa` and a wildcard taking `iled`).
    """
    new = output[j1:j2]
    before = old[0] if first and isinstance(old[0], _Wildcard) and old[0].frame else None
    after = old[-1] if last and isinstance(old[-1], _Wildcard) and old[-1].frame else None
    inner = [unit for unit in old if unit is not before and unit is not after]
    runs_on = (after is not None and j1 > 0 and _in_word(output[j1 - 1], output[j1 : j1 + 1])) or (
        before is not None and j2 < len(output) and _in_word(output[j2 - 1 : j2], output[j2])
    )
    if inner:
        text = _replace_run(inner, new)
    elif runs_on:  # the frame alone, given the rest of a word of the line: the word is the line's
        text = new
    else:
        return "".join(unit.token for unit in old if isinstance(unit, _Wildcard))
    return (before.token if before else "") + text + (after.token if after else "")


def _in_word(left: str, right: str) -> bool:
    """Whether a cut between characters LEFT and RIGHT falls inside a word."""
    return bool(re.fullmatch(r"\w\w", left + right))


def _replace_run(old: Sequence[str | _Wildcard], new: str) -> str:
    """Text for a run of old units the differ replaced by `new`.

    One run of wildcards with literal text on either side keeps the wildcards:
    the literal text before and after them maps to as many characters at the
    start and end of the new text (`1.2.W` -> `1.3.W`). Anything more tangled
    is replaced by the new text.
    """
    wild = [index for index, unit in enumerate(old) if isinstance(unit, _Wildcard)]
    if not wild or any(not isinstance(unit, _Wildcard) for unit in old[wild[0] : wild[-1] + 1]):
        return new
    head, tail = wild[0], len(old) - wild[-1] - 1
    if head + tail > len(new):
        return new
    tokens = "".join(unit.token for unit in old[wild[0] : wild[-1] + 1] if isinstance(unit, _Wildcard))
    return new[:head] + tokens + new[len(new) - tail :]


def _realigned(
    body: str, target: str, tokens: Sequence[str], values: Mapping[str, str], *, per_character: bool
) -> str | None:
    grammar = _matcher_grammar(tokens)
    lines = [body_line(text, values, grammar) for text in body.split("\n")]
    outputs = target.split("\n")
    if len(lines) * len(outputs) > MAX_ALIGN_CELLS:
        return None
    return "\n".join(rewritten_lines(lines, outputs, grammar, values, per_character=per_character, costs=_WHOLE)[0])


def rewritten_lines(
    lines: Sequence[BodyLine],
    outputs: Sequence[str],
    grammar: Grammar,
    values: Mapping[str, str],
    *,
    per_character: bool,
    costs: Costs,
) -> tuple[list[str], bool]:
    """The body's new lines, aligned with OUTPUTS at COSTS (see _align), and whether any line found its place there:
    a line with text of its own kept, or one rewritten from an output line for less than dropping it costs."""
    new_lines: list[str] = []
    placed = False
    for step, i, j in _align(lines, outputs, grammar, costs):
        if step == _KEEP:
            new_lines.append(lines[i].text)
            placed = placed or not lines[i].bare
        elif step == _REPLACE:
            literal = grammar.literal(outputs[j])
            new_lines.append(_intra_line(lines[i], outputs[j], values, grammar) if per_character else literal)
            placed = placed or costs.replace(lines[i], outputs[j : j + 1])[0] < costs.delete
        elif step == _INSERT:
            new_lines.append(grammar.literal(outputs[j]))
    return new_lines, placed


def updated_body(body: str, output: str, tokens: Sequence[str], values: Mapping[str, str] | None = None) -> str | None:
    """The expected body rewritten to match `output`, keeping every wildcard that still fits.

    `body` is the `#test-result` body as written (load placeholders in place),
    `tokens` its wildcard tokens, `values` the {placeholder: value} pairs the
    run substituted. The old body is aligned with the output line by line:
    lines that still match are kept as written (so are their wildcards and
    placeholders), wildcard lines keep covering the lines they cover, and a
    changed line is aligned character by character with its new text, keeping
    each wildcard whose neighbouring text is still found around it and
    replacing the literal text that changed. The result is checked with the
    matcher; when it does not fit, the lines are replaced whole, and when that
    does not fit either, the body becomes the literal output. None when not
    even the literal output matches (it holds a placeholder or a token that
    reads differently). CannotRewrite when a loaded value spans several lines.
    """
    pairs = tuple((values or {}).items())
    if any("\n" in value for _, value in pairs):
        raise CannotRewrite("a loaded value spans several lines; update this #test-result by hand")
    target = output.rstrip("\n")

    def fits(candidate: str) -> bool:
        # against the output as printed: the matcher itself allows its trailing newlines
        return matches(output, substitute(candidate, pairs), tokens)

    if fits(body):
        return body
    for per_character in (True, False):
        candidate = _realigned(body, target, tokens, dict(pairs), per_character=per_character)
        if candidate is not None and fits(candidate):
            return candidate
    return target if fits(target) else None
