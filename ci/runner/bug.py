"""A bug in the harness met while a block runs: the block's error, with the traceback kept beside its output."""

from __future__ import annotations

import dataclasses
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base.files import write_atomically
from ci.base.text import error_line
from ci.guide.model import Status, Step
from ci.record.outcome import BlockResult
from ci.runner.step import unstarted_result

if TYPE_CHECKING:
    from ci.runner.step import StepContext

__all__ = ["internal_error_result"]


def internal_error_result(step: Step, context: StepContext) -> BlockResult:
    """The result of STEP when the harness raised while running or reporting it (call inside the `except`).

    The traceback is printed on stderr and kept in STEM.harness-error.txt; the
    block's output files are kept, with their sizes so far (its processes may
    write more until the guide's teardown ends them). The run goes on to end
    its processes and write every report.
    """
    exc = sys.exc_info()[1]
    what = traceback.format_exception_only(type(exc), exc)[-1].strip() if exc is not None else "unknown error"
    trace = traceback.format_exc()
    where = Path(f"{context.stem(step)}.harness-error.txt")
    try:
        write_atomically(where, trace.encode("utf-8", "backslashreplace"), within=context.output_dir)
        kept = f"; traceback in {where}"
    except (OSError, UnicodeError) as exc_write:
        kept = f"; its traceback could not be kept ({exc_write})"
    message = f"internal error of guide-guard (a bug: please report it): {what}{kept}"
    print(
        error_line(
            f"block {step.name} (line {step.line}): guide-guard had an internal error (a bug: please report it"
            f" with this traceback); the block counts as an error, the rest of its guide is not run:\n{trace}"
        ),
        file=sys.stderr,
        flush=True,
    )
    result = unstarted_result(step, Status.ERROR, message)
    paths = context.paths.get(step.ordinal)
    if paths is None:  # skipped or left out: it had no files
        return result
    context.output_files.used(*paths)  # kept, whatever the block still writes to them before its teardown
    (stdout_path, stdout_bytes), (stderr_path, stderr_bytes) = (_size(path) for path in paths)
    return dataclasses.replace(
        result, stdout_path=stdout_path, stderr_path=stderr_path, stdout_bytes=stdout_bytes, stderr_bytes=stderr_bytes
    )


def _size(path: Path) -> tuple[str | None, int]:
    """PATH and the size of what the block wrote to it so far; (None, 0) when there is no such file."""
    try:
        return str(path), path.stat().st_size
    except OSError:
        return None, 0
