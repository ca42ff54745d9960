"""One step: substitute its loads, start its process, wait within its limit, end what it leaves, and judge it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import MutableMapping
from pathlib import Path

from ci.base import frozen
from ci.base.files import full_disk
from ci.base.signals import exit_words, signal_name
from ci.base.streams import file_contains
from ci.guide.model import Status, Step
from ci.guide.placeholders import substitute
from ci.process.supervisor import BlockProcess, RunInterrupted
from ci.record.outcome import BlockResult, BoundedText, MatchReport, TrackedProcess
from ci.runner.launch import StepContext, start_step
from ci.runner.mismatch import mismatch_message, mismatch_report
from ci.runner.outputs import file_sizes
from ci.runner.stored import bounded, read_stored

__all__ = ["StepContext", "run_step", "unstarted_result"]


@frozen
class _Substituted:
    """A step's texts once the values it loads are put in."""

    command: str  # the body, as it runs
    expected: str | None  # the #test-result body it is matched against (a #test)
    expected_values: tuple[tuple[str, str], ...] = ()  # (placeholder, value) put into the expected body


@frozen
class _Observed:
    """What was measured of a block that was started, whatever its verdict."""

    expected: str | None  # the expected body after substitution (#test), to match against
    expected_shown: BoundedText | None  # the same as reports show it
    expected_values: tuple[tuple[str, str], ...]  # (placeholder, value) put into the expected body
    exited: bool  # its main process ended within its limit
    exit_code: int | None  # None while it had not exited (and after a time-out)
    duration_s: float
    stdout_path: str | None  # None for a stream that kept no file (it stayed empty)
    stderr_path: str | None
    stdout_bytes: int
    stderr_bytes: int
    marker_found: str | None  # the first error marker in stderr (in the one output file of merged streams)
    peak_rss_bytes: int | None
    cpu_s: float | None
    dumps: tuple[str, ...] = ()  # stack dumps taken on its time-out
    dump_notes: tuple[str, ...] = ()
    ended: tuple[TrackedProcess, ...] = ()  # what of its tree the harness ended

    def result(
        self,
        step: Step,
        status: Status,
        message: str,
        *,
        match: MatchReport | None = None,
        stored: tuple[str, BoundedText] | None = None,
    ) -> BlockResult:
        """The block's result with this verdict: what was measured, and the mismatch or stored value if any."""
        return BlockResult(
            step=step,
            status=status,
            exit_code=self.exit_code,
            duration_s=self.duration_s,
            message=message,
            stdout_path=self.stdout_path,
            stderr_path=self.stderr_path,
            stdout_bytes=self.stdout_bytes,
            stderr_bytes=self.stderr_bytes,
            expected=self.expected_shown,
            match=match,
            stored=stored,
            marker_found=self.marker_found,
            dumps=self.dumps,
            dump_notes=self.dump_notes,
            ended=self.ended,
            peak_rss_bytes=self.peak_rss_bytes,
            cpu_s=self.cpu_s,
        )


def unstarted_result(
    step: Step,
    status: Status,
    message: str,
    *,
    substituted: _Substituted | None = None,
) -> BlockResult:
    """The result of a step that was never started: not run, skipped, or it could not be (`substituted` once made).

    It keeps no file: a long expected body is shown cut, the rest is in the guide (and the stored values).
    """
    expected = substituted.expected if substituted else step.expected.body if step.expected else None
    return BlockResult(
        step=step,
        status=status,
        exit_code=None,
        duration_s=0.0,
        message=message,
        stdout_path=None,
        stderr_path=None,
        stdout_bytes=0,
        stderr_bytes=0,
        expected=bounded(expected, None) if expected is not None else None,
        match=None,
        stored=None,
        marker_found=None,
    )


def run_step(step: Step, stored: MutableMapping[str, str], context: StepContext) -> tuple[BlockResult, int | None]:
    """Run one step: its result, and the signal number when a stop signal ended it; a value it stores goes into STORED.

    Every value the step loads is in STORED (the caller says why one is not).
    The whole value is held there alone: the result holds what reports show of it.
    """
    with_nul = sorted({load.name for load in step.loads if "\0" in stored[load.name]})
    if with_nul:
        message = (
            f"could not be run: the stored value of {', '.join(with_nul)} holds a NUL byte, which no command line"
            " can carry; remove it where it is stored (e.g. `| tr -d '\\0'`)"
        )
        return unstarted_result(step, Status.ERROR, message), None
    loaded = step.loaded_sha256(stored)  # before the block runs: a setup storing a name it loads replaces the value
    command = substitute(step.body, tuple((load.placeholder, stored[load.name]) for load in step.loads))
    expected = None
    expected_pairs: tuple[tuple[str, str], ...] = ()
    if step.expected:
        expected_pairs = tuple((load.placeholder, stored[load.name]) for load in step.expected.loads)
        # trailing newlines go after substitution: a value stored empty must not leave one behind
        expected = substitute(step.expected.body, expected_pairs).rstrip("\n")
    substituted = _Substituted(command, expected, expected_pairs)
    block = start_step(step, substituted.command, context)
    if isinstance(block, str):
        return unstarted_result(step, Status.ERROR, block, substituted=substituted), None
    result, signum = _supervise(step, block, substituted, context, stored)
    result = dataclasses.replace(result, loaded_sha256=loaded)
    return _said_if_disk_full(result, context), signum


def _said_if_disk_full(result: BlockResult, context: StepContext) -> BlockResult:
    """A failed block whose output files are on a full disk says so: what it printed, its error too, may be lost.

    Asked of the file system itself (statvfs), once the block has failed:
    a write that found no room leaves none, and nothing else tells, since
    the block's own complaint (`No space left on device`) went to a file on
    that same disk.
    """
    if not result.status.is_failure:
        return result
    note = full_disk(context.output_dir / "blocks")
    if note is None:
        return result
    message = (
        f"{result.message}; {note}, so its output may not have been written whole:"
        " free space there or name another --output-dir"
    )
    return dataclasses.replace(result, message=message)


def _supervise(
    step: Step, block: BlockProcess, substituted: _Substituted, context: StepContext, stored: MutableMapping[str, str]
) -> tuple[BlockResult, int | None]:
    """Wait for a started block within its limit, end what it leaves, and judge it (a stop signal's number too)."""
    paths = context.paths[step.ordinal]
    context.output_files.used(*paths)
    # while this block runs: the previous block's report, this one's header, the next one's files
    context.events.started(step, *paths)
    if step.ordinal in context.following:
        context.output_files.prepare(*context.following[step.ordinal])
    limit_s, by_deadline = step.timeout_s, False
    deadline = context.deadline
    if deadline is not None and deadline - block.started < limit_s:
        limit_s, by_deadline = max(deadline - block.started, 0.0), True
    try:
        exited = context.supervisor.wait(block, limit_s)
    except RunInterrupted as interrupt:
        return _cut_short(step, block, substituted, context, interrupt.signum), interrupt.signum
    if not exited:  # its stacks are dumped and its tree ended now, which may take its grace period
        context.events.ending(
            step, "the run deadline was reached" if by_deadline else f"timed out after {step.timeout_s:g}s"
        )
    observed = _waited(step, block, exited, substituted, context)
    if not exited and by_deadline:
        message = (
            f"the run deadline was reached {limit_s:.1f}s into this block (its own limit is {step.timeout_s:g}s);"
            " its process tree was ended"
        )
        return observed.result(step, Status.TIMED_OUT, message), None
    return _verdict(step, observed, paths[0], context, stored), None


def _cut_short(
    step: Step, block: BlockProcess, substituted: _Substituted, context: StepContext, signum: int
) -> BlockResult:
    """The result of a block whose wait a stop signal ended: its whole tree is ended too."""
    # the supervisor cuts the grace period to about a second once a stop signal has come
    context.events.ending(step, f"interrupted by {signal_name(signum)}")
    ended = tuple(context.supervisor.end_tree(block))
    message = f"interrupted by {signal_name(signum)} after {time.monotonic() - block.started:.1f}s; its process tree was ended"
    paths = context.paths[step.ordinal]
    observed = _observe(
        block,
        substituted,
        paths,
        file_sizes(*paths),
        context,
        context.stem(step),
        exited=False,
        exit_code=block.exit_code,
        ended=ended,
        merged=step.merge_streams,
    )
    return observed.result(step, Status.ERROR, message)


def _waited(
    step: Step, block: BlockProcess, exited: bool, substituted: _Substituted, context: StepContext
) -> _Observed:
    """What was measured of a block waited for to its end or its limit; past its limit, its stacks dumped and its tree ended."""
    supervisor = context.supervisor
    dumps: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    ended: tuple[TrackedProcess, ...] = ()
    if not exited:
        dump_paths, dump_notes = supervisor.dump_stacks(
            block, Path(f"{context.stem(step)}.dumps"), within=context.output_dir
        )
        dumps, notes = tuple(dump_paths), tuple(dump_notes)
        ended = tuple(supervisor.end_tree(block))
    supervisor.reap_orphans()
    paths = context.paths[step.ordinal]
    sizes = file_sizes(*paths)
    writers_left = supervisor.group_alive(block)
    # an empty stream keeps no file (the file itself stays until a later block's files are made)
    # merged streams: no process was given the stderr file, so it stays empty whatever is left running
    writers = (writers_left, writers_left and not step.merge_streams)
    kept = tuple(
        None if context.output_files.take_back(path, size, writing) else path
        for path, size, writing in zip(paths, sizes, writers, strict=True)
    )
    exit_code = block.exit_code if exited else None
    return _observe(
        block,
        substituted,
        kept,
        sizes,
        context,
        context.stem(step),
        merged=step.merge_streams,
        exited=exited,
        exit_code=exit_code,
        dumps=dumps,
        dump_notes=notes,
        ended=ended,
    )


def _observe(
    block: BlockProcess,
    substituted: _Substituted,
    paths: tuple[Path | None, ...],
    sizes: tuple[int, ...],
    context: StepContext,
    stem: str,
    *,
    merged: bool,
    exited: bool,
    exit_code: int | None,
    dumps: tuple[str, ...] = (),
    dump_notes: tuple[str, ...] = (),
    ended: tuple[TrackedProcess, ...] = (),
) -> _Observed:
    """What was measured of a started block once its wait ended (a path is None for a stream that kept no file).

    A long expected body is kept whole in STEM.expected.txt, since reports show only its head.
    MERGED: the block's stderr went into its stdout file, so error markers are looked for there.
    """
    stdout_path, stderr_path = (str(path) if path else None for path in paths)
    stderr_path = None if merged else stderr_path  # its file was never the block's: it stays empty
    marker_path, marker_bytes = (stdout_path, sizes[0]) if merged else (stderr_path, sizes[1])
    expected = substituted.expected
    return _Observed(
        expected=expected,
        expected_shown=None
        if expected is None
        else bounded(expected, Path(f"{stem}.expected.txt"), within=context.output_dir),
        expected_values=substituted.expected_values,
        exited=exited,
        exit_code=exit_code,
        duration_s=time.monotonic() - block.started,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdout_bytes=sizes[0],
        stderr_bytes=sizes[1],
        marker_found=file_contains(marker_path, context.markers) if marker_bytes else None,
        peak_rss_bytes=block.peak_rss_bytes or None,
        cpu_s=block.cpu_s,
        dumps=dumps,
        dump_notes=dump_notes,
        ended=ended,
    )


def _verdict(
    step: Step, observed: _Observed, stdout_path: Path, context: StepContext, stored: MutableMapping[str, str]
) -> BlockResult:
    """The verdict on a block that was waited for to the end of its limit (none was cut short); a value it stores goes into STORED."""
    if not observed.exited:
        message = f"timed out after {step.timeout_s:g}s; its process tree was ended"
        return observed.result(step, Status.TIMED_OUT, message)
    code = observed.exit_code
    if code != 0:
        return observed.result(step, Status.FAILED, exit_words(code))
    if step.expected is not None and observed.expected is not None:
        # a long body is written whole already, to the same file, for the reports' head of it
        written = observed.expected_shown is not None and observed.expected_shown.path is not None
        whole = (Path(f"{context.stem(step)}.expected.txt"), written)
        report = mismatch_report(
            step,
            stdout_path,
            observed.expected,
            observed.expected_values,
            whole,
            within=context.output_dir,
        )
        if report is None:
            return observed.result(step, Status.PASSED, "output matched")
        message = mismatch_message(report, searched=step.expected.search)
        return observed.result(step, Status.MISMATCH, message, match=report)
    if step.store:
        value, shown, note = read_stored(stdout_path, context.stem(step), within=context.output_dir)
        stored[step.store] = value
        return observed.result(step, Status.PASSED, f"stored {step.store}{note}", stored=(step.store, shown))
    return observed.result(step, Status.PASSED, "exit 0")
