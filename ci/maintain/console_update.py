"""Updating a Python-console session: the output lines of the statements whose output changed, rewritten in place.

The run keeps one stdout for the whole session, so what each statement
printed is inferred: the statements whose output still matches hold their
lines, and each statement whose output differs takes the lines left between
them, the reading that changes the fewest statements. When another reading
changes as few, or one more (a statement whose output grew by a line reads as
well as its neighbour printing that line), or none fits, the session is not
rewritten: a guessed attribution would document output under the wrong
statement. So an output that changed its number of lines is rewritten only
where no neighbour could have printed them.

rewrite_console is pure; updated_session applies it to a run's record (the
session's output file) and checks what it would write.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci.base import frozen
from ci.expect.match import DEFAULT_WILDCARD, matches
from ci.guide.dialects.pycon import ConsoleStatement, console_expected, console_statements
from ci.guide.model import DocumentError, Plan, Status
from ci.maintain.guide import plan_without_running
from ci.maintain.lastrun import read_stdout
from ci.maintain.realign import CannotRewrite, updated_body
from ci.maintain.rewrite import SourceLines, unpublishable
from ci.record import RecordedGuide, RecordError

__all__ = ["MAX_ATTRIBUTION_CELLS", "ConsoleRewrite", "rewrite_console", "updated_session"]

MAX_ATTRIBUTION_CELLS = 250_000  # statements x (output lines + 1)^2 the attribution may visit
_TOKENS = (DEFAULT_WILDCARD,)
_FIX = "write the output by hand"


@frozen
class ConsoleRewrite:
    """A console session with the output of its changed statements rewritten."""

    text: str  # the whole guide, every line outside those outputs as it was
    statements: tuple[int, ...]  # the `>>> ` line of each statement whose output was rewritten, in order
    written: str  # the output lines written, joined by newlines (what a guide must not publish is checked in it)


@frozen
class _Segment:
    """A statement with output lines of its own, or a run of statements that may print anything."""

    statement: ConsoleStatement | None  # None for a run of statements that may print anything
    line: int  # the guide line named in messages: the (first) statement's `>>> `

    def fits(self, lines: Sequence[str]) -> bool:
        """Whether LINES (whole output lines) are what the guide gives for it."""
        if self.statement is None:
            return True
        expected = self.statement.output
        if not any(DEFAULT_WILDCARD in each for each in expected):
            return list(lines) == list(expected)
        return bool(lines) and matches("\n".join(lines), "\n".join(expected), _TOKENS)


# how each changed statement's output was attributed: (segment index, first output line, end output line) for each
_Reading = tuple[tuple[int, int, int], ...]


def rewrite_console(text: str, file: str, output: str) -> ConsoleRewrite:
    """The guide TEXT (named FILE) with its session's outputs rewritten to match OUTPUT, the run's stdout; the text as
    it is when OUTPUT matches already. Each changed statement's lines keep the author's wildcards where they still
    fit (ci.maintain.realign); a statement without output lines gets none.

    CannotRewrite, naming FILE:LINE and the fix, when the output cannot be attributed to the statements
    unambiguously, or cannot be written in the session (a blank line, a line read as a prompt).
    """
    source = SourceLines(text)  # the guide's own line ends (CRLF too), kept on every line, written ones included
    try:
        _, statements = console_statements(source.lines, file)
    except DocumentError as error:
        raise CannotRewrite(f"the session no longer reads: {error.problems[0]}") from None
    expected = console_expected(statements, 0)
    if expected is None or matches(output, expected.body, _TOKENS):
        return ConsoleRewrite(text, (), "")
    printed = output.rstrip("\n").split("\n") if output.rstrip("\n") else []
    segments = _segments(statements)
    reading = _attribution(segments, printed, file)
    rewritten: list[int] = []
    written: list[str] = []
    for index, start, end in reversed(reading):  # from the bottom: the lines above keep their numbers
        statement = segments[index].statement
        assert statement is not None, "a run of any output is never changed"
        new_output = _new_output(statement, printed[start:end], file)
        first, last = statement.output_lines[0], statement.output_lines[-1]
        ending = source.endings[first - 1]
        source.lines[first - 1 : last] = new_output
        source.endings[first - 1 : last] = [ending] * len(new_output)
        rewritten.append(statement.line)
        written[:0] = new_output
    new_text = source.text()
    _check_read_back(new_text, file, statements, output)
    return ConsoleRewrite(new_text, tuple(reversed(rewritten)), "\n".join(written))


def _segments(statements: Sequence[ConsoleStatement]) -> list[_Segment]:
    """The statements as the output is cut: one segment per statement with output, one per run of the others."""
    segments: list[_Segment] = []
    for each in statements:
        if not each.any_output:
            segments.append(_Segment(each, each.line))
        elif not segments or segments[-1].statement is not None:
            segments.append(_Segment(None, each.line))
    return segments


def _attribution(segments: Sequence[_Segment], printed: Sequence[str], file: str) -> _Reading:
    """The reading of PRINTED that changes the fewest statements' outputs, when it is the only one changing at most
    one more; CannotRewrite when there is none, or another.

    Beside the fewest, one more: a statement whose output grew by the lines
    the next one printed (`1` then `2` where `1` was expected) reads as well
    as that next one printing them, and the update cannot tell which.
    A table over (segments read, output lines read): each cell keeps, for
    the fewest changes reaching it and one more, up to two distinct readings
    (two are enough to know the end has more than one); a reading with more
    changes than that at a cell has more than that at the end.
    """
    count = len(printed)
    if len(segments) * (count + 1) ** 2 > MAX_ATTRIBUTION_CELLS:
        raise CannotRewrite(
            f"{file}:{segments[0].line}: the session printed {count} lines, too many to attribute to its statements"
            f" here; {_FIX}"
        )
    table: dict[int, dict[int, list[_Reading]]] = {0: {0: [()]}}  # output lines read -> changes -> readings
    for index, segment in enumerate(segments):
        reached: dict[int, dict[int, list[_Reading]]] = {}
        for start, by_changes in table.items():
            for changes, readings in by_changes.items():
                for end in range(start, count + 1):
                    if segment.fits(printed[start:end]):
                        _reach(reached, end, changes, readings)
                    elif end > start and segment.statement is not None:  # changed: it printed something else
                        _reach(reached, end, changes + 1, [(*r, (index, start, end)) for r in readings])
        table = reached
    final = table.get(count)
    if final is None:
        raise CannotRewrite(
            f"{file}:{segments[0].line}: the output cannot be attributed to the session's statements (a statement"
            " that printed nothing cannot be written: no output line means any output); " + _FIX
        )
    readings = [reading for changes in sorted(final) for reading in final[changes]]
    if len(readings) > 1:
        first, *others = sorted({segments[index].line for index, _, _ in set(readings[0]) ^ set(readings[1])})
        also = "".join(f" and which the one at line {line} printed" for line in others)
        raise CannotRewrite(
            f"{file}:{first}: the output cannot be attributed to the session's statements unambiguously: which of its"
            f" lines this statement printed{also} is not known (the output reads more than one way); {_FIX}"
        )
    return readings[0]


def _reach(reached: dict[int, dict[int, list[_Reading]]], end: int, changes: int, readings: list[_Reading]) -> None:
    """Note READINGS, with CHANGES changed statements, as reaching output line END; keep the fewest changes and one
    more, up to two readings each."""
    by_changes = reached.setdefault(end, {})
    known = by_changes.setdefault(changes, [])
    known.extend(reading for reading in readings if reading not in known and len(known) < 2)
    fewest = min(by_changes)
    for more in [each for each in by_changes if each > fewest + 1]:
        del by_changes[more]


def _new_output(statement: ConsoleStatement, printed: Sequence[str], file: str) -> list[str]:
    """The statement's output lines rewritten to PRINTED, keeping its wildcards that still fit."""
    where = f"{file}:{statement.line}"
    if any(not each.strip() for each in printed):
        raise CannotRewrite(
            f"{where}: the statement now prints a blank line, which a session cannot hold (a blank line is skipped);"
            f" {_FIX}, or end its output with a bare `...`"
        )
    if any(each.startswith(">>> ") or each.strip() == ">>>" for each in printed) or printed[0].startswith("... "):
        raise CannotRewrite(f"{where}: the statement now prints a line the session would read as a prompt; {_FIX}")
    body = updated_body("\n".join(statement.output), "\n".join(printed), _TOKENS)
    if body is None:
        raise CannotRewrite(f"{where}: the statement's new output cannot be written as expected output; {_FIX}")
    return body.split("\n")


def _check_read_back(text: str, file: str, statements: Sequence[ConsoleStatement], output: str) -> None:
    """CannotRewrite unless TEXT reads back as the same statements, with expected output OUTPUT matches."""
    try:
        _, again = console_statements(SourceLines(text).lines, file)
    except DocumentError as error:
        raise CannotRewrite(f"the rewritten session would not read: {error.problems[0]}; {_FIX}") from None
    expected = console_expected(again, 0)
    same = [each.source for each in again] == [each.source for each in statements]
    if not same or expected is None or not matches(output, expected.body, _TOKENS):
        line = statements[0].line
        raise CannotRewrite(f"{file}:{line}: the rewritten session would not read back as this output; {_FIX}")


def updated_session(
    text: str, plan: Plan, recorded: RecordedGuide, notes: list[str], dialect: str
) -> tuple[str, tuple[int, ...]]:
    """A console session's guide with the output lines of its changed statements rewritten from the run, and those
    statements' lines; the text as it was when nothing can be (why, in NOTES)."""
    (step,) = plan.steps
    where = f"{plan.guide}:{step.line}"
    block = next((each for each in recorded.blocks if each.step.ordinal == step.ordinal), None)
    if block is None or block.status is not Status.MISMATCH:
        return text, ()
    if step.expected is None:
        notes.append(f"{where}: the session no longer gives any output to check; left alone")
        return text, ()
    if block.step.code_sha256 != step.code_sha256:
        notes.append(f"{where}: the session changed since that run, so its output may be stale; left alone")
        return text, ()
    try:
        output = read_stdout(block)
        rewrite = rewrite_console(text, plan.guide, output)
    except (OSError, RecordError, CannotRewrite) as exc:  # read_stdout's, and an output not attributed or written
        notes.append(f"{exc if isinstance(exc, CannotRewrite) else f'{where}: {exc}'}; left alone")
        return text, ()
    why = unpublishable(rewrite.written, block)
    if why is not None:
        notes.append(f"{where}: {why}")
        return text, ()
    try:  # read back as a run will read it
        expected = plan_without_running(rewrite.text, plan.guide, source_path=plan.guide, dialect=dialect)
    except DocumentError as error:
        notes.append(f"{where}: the rewritten guide would no longer plan: {error.problems[0]}; left alone")
        return text, ()
    read_back = expected.steps[0].expected if len(expected.steps) == 1 else None
    if rewrite.statements and (read_back is None or not matches(output, read_back.body, read_back.fuzzy)):
        notes.append(f"{where}: the rewritten session would still mismatch; left alone")
        return text, ()
    return rewrite.text, rewrite.statements
