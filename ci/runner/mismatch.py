"""The one-line message of a mismatch verdict: the expected line that failed, quoted, masked and bounded."""

from __future__ import annotations

from ci.core.model import MatchReport
from ci.core.text import Masker, hidden_characters

__all__ = ["mismatch_message"]

_QUOTED_CHARS = 200  # of a line (expected or output), at most this much is quoted in a verdict's message


def mismatch_message(report: MatchReport, masker: Masker) -> str:
    """The verdict's line: the first expected line not matched and, where a log hides it, what the output has there.

    Lines are masked before they are quoted: quoting escapes a backslash in a
    secret, which the reporters' masking would then no longer find.
    """
    expected = _quoted(report.first_unmatched_text, masker)
    message = f"stdout does not match the expected output from its line {report.first_unmatched_line}: {expected}"
    if report.actual_line_hidden is not None:
        shown = _quoted(report.actual_line_hidden, masker)
        hidden = ", ".join(hidden_characters(masker.mask(report.actual_line_hidden)))
        message += f"; the output's line there, {shown}, differs from it only in what a log does not show: {hidden}"
    return message


def _quoted(line: str, masker: Masker) -> str:
    """LINE cut to _QUOTED_CHARS (a loaded value may make it megabytes long) where no secret is cut in two, masked,
    then quoted: only the part shown is masked, and no part of a secret escapes the mask."""
    if len(line) > _QUOTED_CHARS:
        return repr(masker.mask(line[: masker.clear_cut(line, _QUOTED_CHARS)]) + "...")
    return repr(masker.mask(line))
