"""Retries (`retry=`): a step that failed or timed out run again, after a pause, each attempt's output kept."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import NoReturn

from ci.base.files import rename_within
from ci.base.signals import signal_name
from ci.guide.model import Status, Step
from ci.record.outcome import Attempt, BlockResult, TrackedProcess
from ci.runner.launch import StepContext

__all__ = ["RunStep", "attempt_stem", "retried", "run_attempts"]

# run_step's shape: the caller passes its own, so that what it runs is what it names (a test may wrap it)
RunStep = Callable[[Step, MutableMapping[str, str], StepContext], tuple[BlockResult, "int | None"]]


def _unhandled(status: NoReturn) -> NoReturn:  # typing.assert_never is Python 3.11+
    raise AssertionError(f"unhandled status {status!r}")


def retried(status: Status) -> bool:
    """Whether a block that ended with STATUS is run again when it has retries left.

    A failure by exit status or time-out may be the network's; a mismatch is
    never retried (the command ran and printed something else: another try
    would hide a real drift), nor a block that could not be run (ERROR).
    """
    match status:
        case Status.FAILED | Status.TIMED_OUT:
            return True
        case Status.PASSED | Status.MISMATCH | Status.ERROR | Status.SKIPPED | Status.NOT_RUN:
            return False
        case _:
            _unhandled(status)


def attempt_stem(stem: str, number: int) -> str:
    """STEM.attempt-N: what the files of an earlier attempt are named after (the last attempt keeps STEM's names)."""
    return f"{stem}.attempt-{number}"


def run_attempts(
    step: Step, stored: MutableMapping[str, str], context: StepContext, run_step: RunStep, *, clock: float
) -> tuple[BlockResult, int | None]:
    """Run the step by RUN_STEP, again after each failed or timed-out attempt while it has retries left.

    Before each further attempt, what the failed one left running is ended
    (a server that never got ready would hold its port against the next
    one), the pause of retry_delay= is waited out, and the failed attempt's
    files are renamed to STEM.attempt-N.*. A stop signal during the pause
    ends the retrying at once, as does a pause that would end past
    --deadline: the last attempt's result stands. The result carries the
    earlier attempts, and its start_s is its last attempt's (counted from
    CLOCK, the guide's start); with the signal's number when a stop signal came.
    """
    attempts: list[Attempt] = []
    while True:
        start_s = time.monotonic() - clock
        result, signum = run_step(step, stored, context)
        result = dataclasses.replace(result, attempts=tuple(attempts), start_s=start_s)
        if signum is not None or not retried(result.status) or len(attempts) >= step.retry:
            return result, signum
        number = len(attempts) + 1
        deadline = context.deadline
        if deadline is not None and time.monotonic() + step.retry_delay_s >= deadline:
            why = f"no attempt {number + 1} of {step.retry + 1}: the run deadline comes before it could start"
            return dataclasses.replace(result, message=f"{result.message}; {why}"), None
        ended = tuple(context.supervisor.end_left_behind(context.tag(step)))
        stem = context.stem(step)
        attempt = _kept(_attempt(result, number, ended), stem, attempt_stem(stem, number), context.output_dir)
        context.events.retrying(step, attempt, step.retry_delay_s)
        signum = context.supervisor.signals.pause(step.retry_delay_s)
        if signum is not None:  # the last attempt's result stands, its files under their usual names again
            back = _kept(attempt, attempt_stem(stem, number), stem, context.output_dir)
            why = f"interrupted by {signal_name(signum)} before attempt {number + 1} of {step.retry + 1}"
            final = dataclasses.replace(
                result,
                message=f"{result.message}; {why}",
                ended=back.ended,
                stdout_path=back.stdout_path,
                stderr_path=back.stderr_path,
            )
            return final, signum
        attempts.append(attempt)


def _attempt(result: BlockResult, number: int, ended: tuple[TrackedProcess, ...]) -> Attempt:
    """The failed attempt RESULT is, numbered NUMBER, with what it left running that was ended since."""
    return Attempt(
        number=number,
        status=result.status,
        exit_code=result.exit_code,
        duration_s=result.duration_s,
        message=result.message,
        stdout_path=result.stdout_path,
        stderr_path=result.stderr_path,
        stdout_bytes=result.stdout_bytes,
        stderr_bytes=result.stderr_bytes,
        ended=result.ended + ended,
        dumps=result.dumps,
    )


def _kept(attempt: Attempt, stem: str, kept_stem: str, output_dir: Path) -> Attempt:
    """ATTEMPT with its files (stdout, stderr, stack dumps) renamed from STEM.* to KEPT_STEM.*.

    Out of the next attempt's way: its files are made new under STEM's names.
    A file that cannot be renamed is left where it is (the next attempt's
    replaces it): the attempt then names no file for that stream.
    """
    paths: list[str | None] = []
    for path in (attempt.stdout_path, attempt.stderr_path):
        if path is None:
            paths.append(None)
            continue
        # .stdout.txt, .stderr.txt, or .output.txt (merged streams): the stem, a slug, may hold dots of its own
        target = Path(kept_stem + "".join(Path(path).suffixes[-2:]))
        try:
            rename_within(Path(path), target, within=output_dir)
        except OSError:
            paths.append(None)
            continue
        paths.append(str(target))
    dumps, kept_dumps = Path(f"{stem}.dumps"), Path(f"{kept_stem}.dumps")
    moved = attempt.dumps
    if dumps.is_dir() and not dumps.is_symlink():
        with contextlib.suppress(OSError):  # else the next attempt's dumps, if any, go beside them
            rename_within(dumps, kept_dumps, within=output_dir)
            moved = tuple(_moved(path, dumps, kept_dumps) for path in attempt.dumps)
    return dataclasses.replace(attempt, stdout_path=paths[0], stderr_path=paths[1], dumps=moved)


def _moved(path: str, directory: Path, to: Path) -> str:
    """PATH, a file under DIRECTORY, as it is named once DIRECTORY was renamed TO."""
    try:
        return str(to / Path(path).relative_to(directory))
    except ValueError:  # not under it: where it was
        return path
