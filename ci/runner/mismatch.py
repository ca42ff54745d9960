"""A mismatch verdict: the report of what differs, with the expected body kept whole on disk, and its one-line message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ci.base.files import write_atomically
from ci.base.text import hidden_characters, masked_to_show_hidden, plural
from ci.expect.examine import examine_file, explain_mismatch
from ci.expect.search import search_file
from ci.guide.model import Step
from ci.guide.placeholders import written_line
from ci.record.outcome import Divergence, MatchReport

__all__ = ["mismatch_message", "mismatch_report"]

_QUOTED_CHARS = 200  # of a line (expected or output), at most this much is quoted in a verdict's message


def mismatch_report(
    step: Step,
    stdout_path: Path,
    expected: str,
    values: tuple[tuple[str, str], ...],
    whole_expected: tuple[Path, bool],
    *,
    within: Path,
) -> MatchReport | None:
    """None when the stdout file matches EXPECTED (the step's result body with VALUES put in), else what differs.

    The line blamed is placed in the guide: in the `#test-result` as written, a
    loaded value spanning lines counting as its placeholder's line. An expected
    body shown cut is kept whole in WHOLE_EXPECTED's file (written unless its
    flag says it holds the body already), a new file under WITHIN (the output directory).
    """
    assert step.expected is not None, "only a #test with a #test-result is matched"
    tokens = step.expected.fuzzy
    if step.expected.search and search_file(str(stdout_path), expected):  # found anywhere: the search's verdict
        return None
    # the whole output, streamed; for a search not found, the view of where the output first departs from it
    examined = examine_file(str(stdout_path), expected, tokens)
    if examined is None:
        if not step.expected.search:
            return None
        return _not_found(step.expected.guide_line(1), expected)
    guide_line = step.expected.guide_line(written_line(step.expected.body, values, examined.blame.line))
    report = explain_mismatch(examined, expected, tokens, guide_line=guide_line)
    if not report.expected_tail:
        return report
    path, written = whole_expected
    try:
        if not written:
            write_atomically(path, expected, encoding="utf-8", within=within)
    except (OSError, UnicodeError):  # its directory was removed by a block; a lone surrogate from --set
        return report
    return dataclasses.replace(report, expected_path=str(path))


def _not_found(first_line: int, expected: str) -> MatchReport:
    """The report of an expected text searched for and not found, where the whole output matched it as a body
    (the search reads its placeholders more strictly): its first line, FIRST_LINE in the guide, is blamed."""
    first = expected.split("\n", 1)[0]
    return MatchReport(
        first_unmatched_line=1,
        first_unmatched_text=first,
        guide_line=first_line,
        divergence=Divergence.DIFFERS,
        actual_line="",
        more_lines=0,
        actual_line_hidden=None,
        diff=f"-{first}",
        expected_head=expected,
        expected_tail="",
        expected_lines=expected.count("\n") + 1,
    )


def mismatch_message(report: MatchReport, *, searched: bool = False) -> str:
    """The verdict's line: the expected line blamed, and what the output does there (SEARCHED: the expected text was
    searched for anywhere in the output, and the line blamed is where the output first departs from it).

    Lines are masked (by the run's policy) before they are quoted: quoting
    escapes a backslash in a secret, which the reporters' masking would then
    no longer find.
    """
    from ci.expect.visible import invisible_characters, looks_alike  # a mismatch only

    if searched:
        found = _quoted(report.first_unmatched_text)
        return (
            f"the expected output is nowhere in the output (stdout and stderr together); its line"
            f" {report.first_unmatched_line}, {found}, is where the output first departs from it"
        )
    line = report.first_unmatched_line
    expected = _quoted(report.first_unmatched_text)
    if report.divergence is Divergence.MISSING:
        return f"stdout ends before the expected output's line {line}: {expected}"
    if report.divergence is Divergence.EXTRA:
        extra = _quoted(report.actual_line)
        more = report.more_lines
        after = f" (and {plural(more, 'more line')})" if more else ""
        return f"stdout goes on after the last expected line (its line {line}, {expected}): {extra}{after}"
    message = f"stdout does not match the expected output from its line {line}: {expected}"
    if report.actual_line_hidden is not None:
        shown = _quoted(report.actual_line_hidden)
        hidden = ", ".join(hidden_characters(report.actual_line_hidden))
        message += f"; the output's line there, {shown}, differs from it only in what a log does not show: {hidden}"
    elif report.actual_line != (text := report.first_unmatched_text) and report.actual_line.split() == text.split():
        shown = _quoted(report.actual_line)
        message += f"; the output's line there, {shown}, differs from it only in blanks (spaces, tabs)"
    elif looks_alike(report.actual_line, report.first_unmatched_text):
        shown = _quoted(report.actual_line)
        lines = (masked_to_show_hidden(line) for line in (report.actual_line, report.first_unmatched_text))
        named = ", ".join(dict.fromkeys(name for line in lines for name in invisible_characters(line)))
        message += f"; the output's line there, {shown}, differs from it only in characters that look like nothing or like others: {named}"
    return message


def _quoted(line: str) -> str:
    """LINE masked, cut to _QUOTED_CHARS (a loaded value may make it megabytes long), then quoted: the quote writes
    out what a log hides, so a secret an escape sequence cuts in two is masked as the log shows it."""
    shown = masked_to_show_hidden(line)
    return repr(shown[:_QUOTED_CHARS] + "...") if len(shown) > _QUOTED_CHARS else repr(shown)
