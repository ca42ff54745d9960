"""The mismatch view's diff: expected lines set against output lines as the matcher reads wildcards, and its one hunk.

A line that matched through a wildcard is no change: a line that is only
wildcards takes any number of output lines (shown folded, `... (24 lines
matched by ...)`), a line with a wildcard inside matches an output line as the
matcher would (`took ... s` against `took 3 s`), and one that starts or ends
with a wildcard may take the lines before or after the one it matches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ci.base import frozen
from ci.base.text import plural

__all__ = ["CONTEXT_LINES", "SHOWN_CHANGES", "Gap", "Op", "Pattern", "align", "hunk"]

CONTEXT_LINES = 3  # unchanged lines shown on each side of a change
SHOWN_CHANGES = 20  # changed lines a hunk shows; the rest are in the expected and actual shown after it
_NEVER = 1 << 40  # a cost no alignment reaches


@frozen
class Gap:
    """Output lines a window leaves out (the middle of a long output, far from the mismatch)."""

    lines: int


Item = str | Gap  # an output line (without its newline), or lines left out


@frozen
class Pattern:
    """One expected line as the view matches it."""

    text: str  # the line as matched (after substitution)
    tokens: tuple[str, ...]  # the wildcard tokens it holds, each once, in order; () for a literal line
    whole: bool  # it is only wildcards: it takes any output lines
    open_start: bool  # it starts with a wildcard: it may take output lines before the one it matches
    open_end: bool  # it ends with one: it may take output lines after the one it matches


@frozen
class Op:
    """One step of an alignment."""

    kind: str  # "=" matched, "-" expected line with no output line, "+" output item not expected, "/" one for the other
    expected: int | None  # index of the expected line; None for "+"
    actual: int  # index of the first output item it takes (where it stands, for "-")
    count: int  # output items it takes: 1 for "+" and "/", 0 for "-", any for "="


# A move: (cost added, name, expected lines taken, output items taken, state after).
# States: 0 nothing begun, 1 a line that matched (or is only wildcards) takes further items,
# 2 a line that starts with a wildcard takes items until the one it matches.
_Move = tuple[int, str, int, int, int]


class _Aligner:
    """The least-cost alignment (a deletion or an insertion costs 1, a line for a line 1) and its steps."""

    def __init__(
        self,
        expected: Sequence[Pattern],
        actual: Sequence[Item],
        line_matches: Callable[[str, Pattern], bool],
        *,
        expected_cut: bool,
        actual_cut: bool,
        placed: int,
    ) -> None:
        self.expected, self.actual = expected, actual
        self.line_matches = line_matches
        self.expected_cut, self.actual_cut, self.placed = expected_cut, actual_cut, placed
        self.weights = [item.lines if isinstance(item, Gap) else 1 for item in actual]
        self.equal: dict[tuple[int, int], bool] = {}
        m, n = len(expected), len(actual)
        self.costs = [[[_NEVER] * (n + 1) for _ in range(m + 1)] for _ in range(3)]
        for i in range(m, -1, -1):
            for j in range(n, -1, -1):
                self._fill(i, j)

    def _fill(self, i: int, j: int) -> None:
        """The least costs from expected line I, output item J, in each state: `moves` written out, for speed.

        Every move leads to a later line or a later item, so those are known.
        """
        m, n = len(self.expected), len(self.actual)
        now, after = self.costs[0][i], self.costs[0][i + 1] if i < m else []
        if i == m:
            if j < n:
                now[j] = now[j + 1] + (0 if self.expected_cut else self.weights[j])
            else:
                now[j] = 0  # both sides done
            return
        pattern = self.expected[i]
        body_ends = i == m - 1 and not self.expected_cut
        taking, waiting = self.costs[1][i], self.costs[2][i]
        taking[j] = after[j] if j == n else min(after[j], taking[j + 1])
        if j == n:
            if (self.actual_cut and i >= self.placed) or (pattern.whole and body_ends):
                now[j] = after[j]
            else:
                now[j] = 1 + after[j]
            return
        matched = self.matches(i, j)
        waiting[j] = min(waiting[j + 1], after[j + 1]) if matched else waiting[j + 1]
        best = min(1 + after[j], self.weights[j] + now[j + 1])
        if pattern.whole:
            best = min(best, taking[j + 1], after[j] if body_ends else _NEVER)
        elif matched:
            best = min(best, after[j + 1], taking[j + 1] if pattern.open_end else _NEVER)
        if pattern.open_start and not pattern.whole:
            best = min(best, waiting[j + 1])
        if not matched and not isinstance(self.actual[j], Gap):
            best = min(best, 1 + after[j + 1])
        now[j] = best

    def matches(self, i: int, j: int) -> bool:
        item = self.actual[j]
        if isinstance(item, Gap):
            return False
        if (i, j) not in self.equal:
            self.equal[i, j] = self.line_matches(item, self.expected[i])
        return self.equal[i, j]

    def moves(self, i: int, j: int, state: int) -> list[_Move]:
        """The moves from expected line I, output item J in STATE, the preferred first (ties go to it)."""
        m, n = len(self.expected), len(self.actual)
        if i == m:
            if state or j == n:
                return []
            if self.expected_cut:  # output lines past the window's expected lines may be theirs
                return [(0, "skip", 0, 1, 0)]
            return [(self.weights[j], "insert", 0, 1, 0)]
        pattern = self.expected[i]
        body_ends = i == m - 1 and not self.expected_cut  # only there may a wildcard line take no line at all
        if state == 1:
            taken = [(0, "absorb", 0, 1, 1)] if j < n else []
            return [(0, "close", 1, 0, 0), *taken]
        if state == 2:
            if j == n:
                return []
            return [(0, "match", 1, 1, 0)] * self.matches(i, j) + [(0, "absorb", 0, 1, 2)]
        if j == n:
            if self.actual_cut and i >= self.placed:  # the output goes on past the window: the line may be there
                return [(0, "skip", 1, 0, 0)]
            return [(0, "close", 1, 0, 0)] if pattern.whole and body_ends else [(1, "delete", 1, 0, 0)]
        moves: list[_Move] = []
        if pattern.whole:
            moves += [(0, "close", 1, 0, 0)] * body_ends + [(0, "take", 0, 1, 1)]
        elif self.matches(i, j):
            moves += [(0, "match", 1, 1, 0)] + [(0, "take", 0, 1, 1)] * pattern.open_end
        if pattern.open_start and not pattern.whole:
            moves.append((0, "take_before", 0, 1, 2))
        moves.append((1, "delete", 1, 0, 0))
        if not isinstance(self.actual[j], Gap) and not self.matches(i, j):
            moves.append((1, "replace", 1, 1, 0))
        moves.append((self.weights[j], "insert", 0, 1, 0))
        return moves

    def steps(self) -> list[Op]:
        """The alignment, from the start of both sides."""
        ops: list[Op] = []
        i = j = state = 0
        while True:
            goal = self.costs[state][i][j]
            chosen = next(
                (
                    move
                    for move in self.moves(i, j, state)
                    if move[0] + self.costs[move[4]][i + move[2]][j + move[3]] == goal
                ),
                None,
            )
            if chosen is None or goal >= _NEVER:
                assert (i, j, state) == (len(self.expected), len(self.actual), 0), "a path that ends nowhere"
                return ops
            _, name, di, dj, after = chosen
            if name == "absorb" or (name == "match" and state == 2):  # one more item for the line begun
                last = ops[-1]
                ops[-1] = Op("=", last.expected, last.actual, last.count + 1)
            elif name in ("match", "take", "take_before"):
                ops.append(Op("=", i, j, 1))
            elif name == "close" and state == 0:  # a wildcard line that takes no line, at the end of the body
                ops.append(Op("=", i, j, 0))
            elif name in ("delete", "insert", "replace"):
                kind = {"delete": "-", "insert": "+", "replace": "/"}[name]
                ops.append(Op(kind, None if kind == "+" else i, j, 0 if kind == "-" else 1))
            i, j, state = i + di, j + dj, after


def align(
    expected: Sequence[Pattern],
    actual: Sequence[Item],
    line_matches: Callable[[str, Pattern], bool],
    *,
    expected_cut: bool = False,
    actual_cut: bool = False,
    placed: int = 0,
) -> list[Op]:
    """The alignment of EXPECTED lines with ACTUAL output items that changes the fewest lines.

    LINE_MATCHES says whether an output line matches an expected one. With
    EXPECTED_CUT more expected lines follow the window (output lines left at
    its end may be theirs); with ACTUAL_CUT more output follows (expected lines
    left at its end may be found there, but for the first PLACED ones, known
    to be in the window): either costs nothing and shows no step.
    """
    aligner = _Aligner(expected, actual, line_matches, expected_cut=expected_cut, actual_cut=actual_cut, placed=placed)
    return aligner.steps()


def _first_change(ops: Sequence[Op]) -> int | None:
    return next((index for index, op in enumerate(ops) if op.kind != "="), None)


def _span(ops: Sequence[Op], first: int) -> tuple[int, int, bool]:
    """Where the hunk around the change at FIRST starts and ends in OPS, and whether it stops short of the change's end."""
    start = first
    while start > 0 and first - start < CONTEXT_LINES and ops[start - 1].kind == "=":
        start -= 1
    shown = same = 0
    end = first
    while end < len(ops):
        op = ops[end]
        if op.kind == "=":
            same += 1
            if same == 2 * CONTEXT_LINES:
                return start, end - CONTEXT_LINES + 1, False
        else:
            same = 0
            shown += 2 if op.kind == "/" else 1
            if shown > SHOWN_CHANGES:
                return start, end, True
        end += 1
    return start, len(ops) - max(same - CONTEXT_LINES, 0), False


def hunk(
    ops: Sequence[Op],
    expected: Sequence[Pattern],
    actual: Sequence[Item],
    shown: Callable[[str], str],
    *,
    first_expected: int,
    first_actual: int,
    actual_cut: bool = False,
) -> list[str] | None:
    """The unified-diff hunk around the first change of OPS; None when OPS change nothing.

    FIRST_EXPECTED and FIRST_ACTUAL are the 1-based line numbers of the
    window's first expected line and output item, for the `@@` line. SHOWN
    makes a line fit for the log (masked, hidden bytes written out, cut).
    ACTUAL_CUT: more output follows the window, so a wildcard line that takes
    the window's last items may take more.
    """
    first = _first_change(ops)
    if first is None:
        return None
    start, end, cut = _span(ops, first)
    lines: list[str] = []
    removed: list[str] = []
    added: list[str] = []
    expected_at = sum(1 for op in ops[:start] if op.expected is not None)
    actual_at = sum(sum(_weight(actual, op.actual + k) for k in range(op.count)) for op in ops[:start])
    expected_count = actual_count = 0
    for op in ops[start:end]:
        taken = sum(_weight(actual, op.actual + k) for k in range(op.count))
        expected_count += op.expected is not None
        actual_count += taken
        if op.kind == "=":
            lines += removed + added
            removed, added = [], []
            more = actual_cut and op.count > 0 and op.actual + op.count == len(actual)
            lines.append(" " + _matched(op, expected, actual, shown, taken, more=more))
            continue
        if op.expected is not None:
            removed.append("-" + shown(expected[op.expected].text))
        if op.kind in "+/":
            item = actual[op.actual]
            if isinstance(item, Gap):
                added.append(f"+[... {plural(item.lines, 'more output line')} ...]")
            else:
                added.append("+" + shown(item))
    lines += removed + added
    if cut:
        lines.append("[... the change goes on: see the expected and actual output below ...]")
    elif _first_change(ops[end:]) is not None:
        lines.append("[... and more differences further on: see the expected and actual output below ...]")
    old = first_expected + expected_at - (expected_count == 0)
    new = first_actual + actual_at - (actual_count == 0)
    return [f"@@ -{old},{expected_count} +{new},{actual_count} @@", *lines]


def _weight(actual: Sequence[Item], index: int) -> int:
    item = actual[index]
    return item.lines if isinstance(item, Gap) else 1


def _matched(
    op: Op, expected: Sequence[Pattern], actual: Sequence[Item], shown: Callable[[str], str], taken: int, *, more: bool
) -> str:
    """A matched line as the hunk shows it: the output's line, or the expected line folded over what it took
    (MORE: and perhaps lines past the window)."""
    assert op.expected is not None
    pattern = expected[op.expected]
    item = actual[op.actual] if op.count == 1 else None
    if isinstance(item, str) and not pattern.whole:
        return shown(item)
    by = " ".join(pattern.tokens)
    count = f"{taken} or more lines" if more else plural(taken, "line")
    return f"{shown(pattern.text)} ({count} matched by {by})"
