"""Why a block did not pass, in one line: the last line where it said so, and the guide's warnings about it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ci.base.streams import read_tail
from ci.base.text import clean_text, clean_unmasked
from ci.guide.model import Problem, Status, Step
from ci.record.outcome import BlockResult

__all__ = [
    "FAILURE_WORDS",
    "REASON_CHARS",
    "REASON_TAIL_BYTES",
    "block_reason",
    "failure_line",
    "merged_failure_line",
    "reason_text",
    "warnings_about",
]

REASON_CHARS = 200  # each part of a reason (the block's line, a warning) is cut to this many characters
REASON_TAIL_BYTES = 64 * 1024  # the end of a stream read for its failure line: a block may print gigabytes
# The words with which a guide's own checks say they failed (`echo "FAILED: server never became ready" >&2`);
# upper case and whole, so that "0 errors" or "test_failed.py" is no failure line.
FAILURE_WORDS = re.compile(r"\b(?:FAILED|ERROR)\b")
_TRACEBACK = "Traceback (most recent call last)"
# In merged streams, what a program writes to stderr when it gives up, with no stream left to tell it by:
# `error: ...`, `fatal: ...` (a word before them too: `gcc: error: ...`, `npm error ...` does not count), and the
# shell's own `...: command not found`, `...: No such file or directory`, `...: Permission denied`.
_COMPLAINT = re.compile(
    r"(?:^|[\s:\]])(?:error|fatal)(?:\[[^\]]*\])?:|: (?:command not found|No such file or directory|Permission denied)\b",
    re.IGNORECASE,
)
_WARNINGS_SHOWN = 3  # warnings quoted in one reason; the rest are counted


def _exception_line(lines: Sequence[str], header: int) -> int | None:
    """Where the exception line of the Python traceback whose header is at HEADER is: the first line after it
    that is not one of its indented frames (`  File ...`); None when the text ends before it."""
    for index in range(header + 1, len(lines)):
        if lines[index].strip() and not lines[index].startswith((" ", "\t")):
            return index
    return None


def _last_text(lines: Sequence[str]) -> str | None:
    return next((line.strip() for line in reversed(lines) if line.strip()), None)


def _said(lines: Sequence[str], markers: Sequence[str]) -> str | None:
    """The last of LINES holding an error marker or the word FAILED or ERROR, a traceback standing for its
    exception line; None when none does."""
    said = [index for index, line in enumerate(lines) if FAILURE_WORDS.search(line) or _marked(line, markers)]
    for header in [index for index, line in enumerate(lines) if _TRACEBACK in line]:
        exception = _exception_line(lines, header)
        said += [] if exception is None else [exception]
    return lines[max(said)].strip() if said else None


def failure_line(stderr: str, stdout: str, markers: Sequence[str]) -> str | None:
    """The line that says why a block failed, from the ends of its streams: None when both are blank.

    Stderr's last line holding an error marker (MARKERS) or the word FAILED or ERROR, a traceback standing for
    its exception line (`RuntimeError: ...`), not its header; else such a line of stdout (a guide's check that
    echoes its FAILED line, a command run with `2>&1`); else stderr's last non-empty line, else stdout's.
    The line is cleaned of what a log hides, not masked nor cut: `reason_text` does that.
    """
    # as a log shows them (a carriage return ends a line too), indents kept: they tell a frame from its exception
    streams = [clean_unmasked(text).split("\n") for text in (stderr, stdout)]
    for lines in streams:
        said = _said(lines, markers)
        if said is not None:
            return said
    return next((line for line in map(_last_text, streams) if line is not None), None)


def merged_failure_line(output: str, markers: Sequence[str]) -> str | None:
    """The line that says why a block whose stderr went into its stdout failed, from the end of that one OUTPUT:
    None when it is blank.

    As `failure_line` reads stderr, with no stream to tell the complaint from the rest: the last line holding an
    error marker or FAILED or ERROR, a traceback standing for its exception line; else the last line that reads as
    a program's complaint (`error: ...`, `fatal: ...`, `bash: foo: command not found`), which a label block's stderr
    would end with; else the last non-empty line.
    """
    lines = clean_unmasked(output).split("\n")
    said = _said(lines, markers)
    if said is not None:
        return said
    complaint = next((line.strip() for line in reversed(lines) if _COMPLAINT.search(line)), None)
    return complaint if complaint is not None else _last_text(lines)


def _marked(line: str, markers: Sequence[str]) -> bool:
    return any(marker and marker in line for marker in markers)


def _span(step: Step) -> list[tuple[int, int]]:
    """The guide lines a step takes (first and last, both included): its fences and its #test-result's."""
    spans = [(step.line, step.line + step.body.count("\n") + 2)]
    if step.expected is not None:
        spans.append((step.expected.line, step.expected.line + step.expected.body.count("\n") + 2))
    return spans


def warnings_about(step: Step, warnings: Sequence[Problem]) -> tuple[Problem, ...]:
    """The guide's warnings (printed before the run) on a line of STEP's or of its #test-result's, in order."""
    spans = _span(step)
    return tuple(
        warning
        for warning in warnings
        if warning.file == step.file and any(first <= warning.line <= last for first, last in spans)
    )


def _bounded(text: str) -> str:
    """TEXT on one line, masked (by the run's policy, in clean_text), then cut to REASON_CHARS: masked first, so
    that no cut shows part of a secret."""
    line = " ".join(clean_text(text).split())
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS] + " [...]"


def reason_text(own_line: str | None, warnings: Sequence[Problem]) -> str | None:
    """The reason reports show: the block's failure line, then each warning about it (`warning at line N: ...`),
    `; ` between them, each masked and bounded; None when there is neither."""
    parts = [_bounded(own_line)] if own_line else []
    parts += [_bounded(f"warning at line {w.line}: {w.message}") for w in warnings[:_WARNINGS_SHOWN]]
    if len(warnings) > _WARNINGS_SHOWN:
        parts.append(f"and {len(warnings) - _WARNINGS_SHOWN} more warnings")
    return "; ".join(parts) or None


def block_reason(result: BlockResult, *, markers: Sequence[str], warnings: Sequence[Problem]) -> str | None:
    """Why RESULT's block did not pass, beyond its message; None for a block that passed, was skipped or not run.

    A block that failed, timed out or could not run gives the failure line of its streams' ends (their last
    REASON_TAIL_BYTES each: the rest of a long stream is never read; of its one output, merged). A mismatch, whose
    message names the expected line that failed, gives its stderr's error line, when stderr has one (the last
    line holding a marker, FAILED or ERROR, a traceback's exception line: a `pip install` that printed its usual
    stdout but said on stderr why it installed nothing); a merged block's output is its actual side, shown in
    full already. Either is followed by the guide's warnings about the block.
    """
    if not result.status.is_failure:
        return None
    own = None
    if result.status is Status.MISMATCH:
        if not result.step.merge_streams:
            stderr = clean_unmasked(read_tail(result.stderr_path, REASON_TAIL_BYTES)).split("\n")
            own = _said(stderr, markers)
    elif result.step.merge_streams:
        own = merged_failure_line(read_tail(result.stdout_path, REASON_TAIL_BYTES), markers)
    else:
        stderr_text, stdout = (read_tail(path, REASON_TAIL_BYTES) for path in (result.stderr_path, result.stdout_path))
        own = failure_line(stderr_text, stdout, markers)
    return reason_text(own, warnings_about(result.step, warnings))
