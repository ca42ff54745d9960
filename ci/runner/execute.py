"""Execution: run a plan's steps one by one, check their output, keep what they store."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from ci.core.match import explain_mismatch, match_file
from ci.core.model import (
    BlockResult,
    DiagnosticResult,
    GuideOutcome,
    GuideSettings,
    Language,
    Plan,
    Status,
    Step,
    TrackedProcess,
)
from ci.core.plan import substitute
from ci.core.text import FULL_LIMIT_BYTES, file_contains, read_view
from ci.runner.process import BlockProcess, ProcessSupervisor, RunInterrupted

__all__ = [
    "DEFAULT_DIAGNOSTICS_TIMEOUT_S",
    "DEFAULT_ERROR_MARKERS",
    "DIAGNOSTIC_OUTPUT_LIMIT_BYTES",
    "RUN_DEADLINE",
    "Listener",
    "RunOptions",
    "not_run_outcome",
    "run_guide",
]

DEFAULT_ERROR_MARKERS = ("[ERROR]", "Traceback (most recent call last)")
RUN_DEADLINE = "run deadline"  # the reason of every block left out because --deadline was reached
_STORE_LIMIT_BYTES = 16 * 1024 * 1024
DEFAULT_DIAGNOSTICS_TIMEOUT_S = 60.0  # each ci.diagnostics command's limit unless ci.diagnostics_timeout says
DIAGNOSTIC_OUTPUT_LIMIT_BYTES = 1024 * 1024  # a diagnostic printing more is stopped there (RLIMIT_FSIZE)
_DIAGNOSED = (Status.FAILED, Status.MISMATCH, Status.TIMED_OUT)  # statuses after which diagnostics run
_PAST_DEADLINE_DIAGNOSTIC_S = 10.0  # each diagnostic's limit once --deadline has passed
_DIAGNOSTIC_GRACE_S = 2.0  # SIGTERM to SIGKILL for a diagnostic past its limit: it holds up the report


class Listener(Protocol):
    """Receives the run's events as they happen (the live console)."""

    def block_started(self, step: Step, total: int, stdout_path: Path, stderr_path: Path) -> None: ...

    def block_finished(self, result: BlockResult, total: int) -> None: ...


@dataclass(frozen=True)
class RunOptions:
    """How to run a plan: where, with which extra settings."""

    workdir: str  # every block's working directory: the harness moves there before the first block
    output_dir: Path  # block outputs go under output_dir/blocks
    preset: Mapping[str, str]  # values stored before the first block (--set)
    error_markers: tuple[str, ...]  # defaults and --error-marker; the guide's are added
    keep_going: bool  # run the remaining blocks after a failure
    block_file_prefix: str = ""  # distinguishes guides when several run together
    deadline: float | None = None  # --deadline: when the whole run must stop (time.monotonic()), if set


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "block"


def _output_stem(step: Step, options: RunOptions) -> str:
    """blocks/NNN-name: its .stdout.txt, .stderr.txt and .dumps/ sit beside each other."""
    return f"{options.output_dir}/blocks/{options.block_file_prefix}{step.ordinal:03d}-{_slug(step.name)}"


def _output_paths(step: Step, options: RunOptions) -> tuple[Path, Path]:
    stem = _output_stem(step, options)
    return Path(f"{stem}.stdout.txt"), Path(f"{stem}.stderr.txt")


class _OutputFiles:
    """Makes each block's output files ahead of time, while the block before it runs.

    Creating a file can cost more than a whole trivial block on some file
    systems (it is the allocation of an inode, not the name); the harness is
    only waiting while a block runs, so the next block's files are made then,
    on the other core, instead of in the spawn that the run waits for. A
    stream that a block left empty keeps no file of its own: once nothing of
    its process group is left that could still write to it, its file is
    renamed to serve a later block (a rename is cheap). Files made for blocks
    that never ran are removed at the end.
    """

    def __init__(self) -> None:
        self.spare: list[Path] = []  # empty files of finished blocks, free to rename
        self.made: set[Path] = set()  # made ahead for blocks that have not run yet

    def prepare(self, *paths: Path) -> None:
        for path in paths:
            if path in self.made:
                continue
            try:
                if self.spare:
                    os.rename(self.spare.pop(), path)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except OSError:
                continue  # (a file of an earlier run, say): the spawn opens it with O_TRUNC
            self.made.add(path)

    def used(self, *paths: Path) -> None:
        self.made.difference_update(paths)

    def take_back(self, path: Path, size_bytes: int, writers_left: bool) -> bool:
        """Keep an empty stream's file for later; True when it was taken."""
        if size_bytes or writers_left:
            return False
        self.spare.append(path)
        return True

    def remove_unused(self) -> None:
        for path in [*self.spare, *self.made]:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.spare.clear()
        self.made.clear()


class _Events:
    """Tells the listener about blocks in order, holding a finished block's report until the next block runs.

    Reporting a block (reading its output again to show it) is a good part of
    the harness's own time per block; written while the next block runs, it
    no longer delays that block's start. The listener sees the same events in
    the same order: the next block's start is announced right after its
    spawn, once the previous report is out.
    """

    def __init__(self, listener: Listener, total: int) -> None:
        self.listener = listener
        self.total = total
        self.pending: BlockResult | None = None  # finished, not reported yet
        self.announced: Step | None = None  # the last block whose start was announced

    def started(self, step: Step, stdout_path: Path, stderr_path: Path) -> None:
        """Announce a block's start once (after its spawn, or when it could not be started)."""
        if self.announced is step:
            return
        self.flush()
        self.announced = step
        self.listener.block_started(step, self.total, stdout_path, stderr_path)

    def finished(self, result: BlockResult) -> None:
        self.flush()
        self.pending = result

    def flush(self) -> None:
        if self.pending is not None:
            result, self.pending = self.pending, None
            self.listener.block_finished(result, self.total)


def _argv_choices(language: Language, command: str) -> list[list[str]]:
    """The commands to try, in order; the block's own PATH decides which program they are."""
    if language is Language.SHELL:
        return [["bash", "-c", command]]
    # the container's interpreter, as a reader typing `python` would get it
    return [["python", "-c", command], ["python3", "-c", command]]


def _result(step: Step, status: Status, message: str, **fields: object) -> BlockResult:
    values: dict[str, object] = {
        "exit_code": None,
        "duration_s": 0.0,
        "stdout_path": None,
        "stderr_path": None,
        "stdout_bytes": 0,
        "stderr_bytes": 0,
        "command": step.body,
        "expected": step.expected.body if step.expected else None,
        "match": None,
        "stored": None,
        "marker_found": None,
    }
    values.update(fields)
    return BlockResult(step=step, status=status, message=message, **values)  # type: ignore[arg-type]


def not_run_outcome(plan: Plan, reason: str, *, deadline_reached: bool = False) -> GuideOutcome:
    """The outcome of a guide that never started (the run was interrupted, or its deadline reached, before it)."""
    return GuideOutcome(
        plan=plan,
        results=tuple(_result(step, Status.NOT_RUN, reason) for step in plan.steps),
        leftovers=(),
        interrupted_by=None,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=0.0,
        deadline_reached=deadline_reached,
    )


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def run_guide(
    plan: Plan,
    *,
    left_out: Mapping[int, str],
    options: RunOptions,
    supervisor: ProcessSupervisor,
    listener: Listener,
) -> GuideOutcome:
    """Run every step of a plan in order and return the outcome; RunInterrupted is absorbed."""
    os.chdir(options.workdir)  # blocks inherit it (see ProcessSupervisor.start)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    clock = time.monotonic()
    stored: dict[str, str] = dict(options.preset)
    markers = tuple(dict.fromkeys((*options.error_markers, *plan.settings.error_markers)))
    env = {**os.environ, "PWD": _pwd(options.workdir), **plan.settings.env}
    results: list[BlockResult] = []
    stop_reason: str | None = None
    interrupted_by: int | None = None
    deadline_reached = False
    total = len(plan.steps)
    (options.output_dir / "blocks").mkdir(parents=True, exist_ok=True)
    output_files = _OutputFiles()
    events = _Events(listener, total)
    runnable = [step for step in plan.steps if step.skip_reason is None and step.ordinal not in left_out]
    paths = {step.ordinal: _output_paths(step, options) for step in runnable}
    following = {step.ordinal: paths[after.ordinal] for step, after in itertools.pairwise(runnable)}
    try:
        for step in plan.steps:
            signum = supervisor.stop_requested()
            if signum is not None and stop_reason is None:
                interrupted_by = signum
                stop_reason = f"run interrupted by signal {signum}"
            if stop_reason is None and _past(options.deadline):
                stop_reason, deadline_reached = RUN_DEADLINE, True
            if stop_reason is not None:
                results.append(_result(step, Status.NOT_RUN, stop_reason))
                continue
            if step.ordinal in left_out:
                results.append(_result(step, Status.NOT_RUN, left_out[step.ordinal]))
                continue
            if step.skip_reason is not None:
                results.append(_result(step, Status.SKIPPED, step.skip_reason))
                events.finished(results[-1])
                continue
            try:
                result = _run_step(
                    step,
                    stored,
                    env,
                    markers,
                    options,
                    supervisor,
                    events,
                    output_files=output_files,
                    paths=paths[step.ordinal],
                    next_paths=following.get(step.ordinal),
                )
            except RunInterrupted as interrupt:
                interrupted_by = interrupt.signum
                result = interrupt.result or _interrupted(step, interrupt.signum, supervisor)
                stop_reason = f"run interrupted by signal {interrupt.signum}"
            result, signum = _run_diagnostics(step, result, plan.settings, env, options, supervisor)
            if signum is not None and stop_reason is None:
                interrupted_by = signum
                stop_reason = f"run interrupted by signal {signum}"
            events.started(step, *paths[step.ordinal])  # unless its spawn did
            events.finished(result)
            if result.stored is not None:
                stored[result.stored[0]] = result.stored[1]
            results.append(result)
            if stop_reason is None and _past(options.deadline):  # the reason for what follows, before any failure
                stop_reason, deadline_reached = RUN_DEADLINE, True
            if result.status.is_failure and not options.keep_going and stop_reason is None:
                stop_reason = f"after block {step.name} (line {step.line}) {result.status.value}"
    finally:  # what ran is reported, and no file of a block that never ran is left, whatever happens
        events.flush()
        output_files.remove_unused()
    return GuideOutcome(
        plan=plan,
        results=tuple(results),
        leftovers=(),
        interrupted_by=interrupted_by,
        started_at=started_at,
        duration_s=time.monotonic() - clock,
        deadline_reached=deadline_reached,
    )


def _pwd(workdir: str) -> str:
    """PWD for the blocks, as a shell that did `cd` there would have it (bash checks it; python does not).

    The harness's own PWD is kept when it names the working directory (a
    path through a symbolic link, as the user typed it).
    """
    inherited = os.environ.get("PWD", "")
    try:
        if os.path.isabs(inherited) and os.path.samefile(inherited, workdir):
            return inherited
    except OSError:
        pass
    return workdir


def _interrupted(step: Step, signum: int, supervisor: ProcessSupervisor) -> BlockResult:
    """The result of a block cut short by a signal outside its wait (its tree is ended too)."""
    ended = supervisor.end_tree(supervisor.active) if supervisor.active else []
    return _result(step, Status.ERROR, f"interrupted by signal {signum}", ended=tuple(ended))


def _sizes(*paths: Path) -> tuple[int, ...]:
    sizes = []
    for path in paths:
        try:
            sizes.append(os.stat(path).st_size)
        except OSError:
            sizes.append(0)
    return tuple(sizes)


def _run_step(
    step: Step,
    stored: Mapping[str, str],
    env: Mapping[str, str],
    markers: tuple[str, ...],
    options: RunOptions,
    supervisor: ProcessSupervisor,
    events: _Events,
    output_files: _OutputFiles,
    paths: tuple[Path, Path],
    next_paths: tuple[Path, Path] | None,
) -> BlockResult:
    stdout_path, stderr_path = paths
    missing = [load.name for load in step.loads if load.name not in stored]
    if step.expected:
        missing += [load.name for load in step.expected.loads if load.name not in stored]
    if missing:
        names = ", ".join(sorted(set(missing)))
        return _result(
            step,
            Status.ERROR,
            f"could not be run: {names} was never stored (its setup did not run); pass --set NAME=VALUE",
        )
    pairs = tuple((load.placeholder, stored[load.name]) for load in step.loads)
    command = substitute(step.body, pairs)
    expected = None
    if step.expected:
        expected_pairs = tuple((load.placeholder, stored[load.name]) for load in step.expected.loads)
        # trailing newlines go after substitution: a value stored empty must not leave one behind
        expected = substitute(step.expected.body, expected_pairs).rstrip("\n")

    output_files.prepare(stdout_path, stderr_path)  # made already, unless this is the first block
    block = None
    for argv in _argv_choices(step.language, command):
        try:
            block = supervisor.start(
                argv,
                env=env,
                stdout_path=stdout_path,
                stderr_path=stderr_path,
                block_name=step.name,
                block_tag=f"{options.block_file_prefix}{step.ordinal}",
            )
            break
        except FileNotFoundError:
            continue
        except OSError as exc:
            return _result(step, Status.ERROR, f"could not be run: {exc}", command=command, expected=expected)
    if block is None:
        wanted = " or ".join(argv[0] for argv in _argv_choices(step.language, command))
        return _result(step, Status.ERROR, f"could not be run: no {wanted} on PATH", command=command, expected=expected)
    output_files.used(stdout_path, stderr_path)
    # while this block runs: the previous block's report, this one's header, the next one's files
    events.started(step, stdout_path, stderr_path)
    if next_paths is not None:
        output_files.prepare(*next_paths)
    limit_s, by_deadline = step.timeout_s, False
    if options.deadline is not None and options.deadline - block.started < limit_s:
        limit_s, by_deadline = max(options.deadline - block.started, 0.0), True
    try:
        exited = supervisor.wait(block, limit_s)
    except RunInterrupted as interrupt:
        # the supervisor cuts the grace period to about a second once a stop signal has come
        cut_short = supervisor.end_tree(block)
        interrupt.result = _result(
            step,
            Status.ERROR,
            f"interrupted by signal {interrupt.signum} after {time.monotonic() - block.started:.1f}s; its process tree was ended",
            ended=tuple(cut_short),
            **_observed(block, paths, _sizes(*paths), command, expected, markers),
        )
        raise
    dumps: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    ended: tuple[TrackedProcess, ...] = ()
    if not exited:
        dump_paths, dump_notes = supervisor.dump_stacks(block, Path(f"{_output_stem(step, options)}.dumps"))
        dumps, notes = tuple(dump_paths), tuple(dump_notes)
        ended = tuple(supervisor.end_tree(block))
    supervisor.reap_orphans()
    sizes = _sizes(*paths)
    writers_left = supervisor.group_alive(block)
    # an empty stream keeps no file (the file itself stays until a later block's files are made)
    kept = tuple(
        None if output_files.take_back(path, size, writers_left) else path
        for path, size in zip(paths, sizes, strict=True)
    )
    common = _observed(block, kept, sizes, command, expected, markers)
    common.update(exit_code=block.exit_code if exited else None, dumps=dumps, dump_notes=notes, ended=ended)
    if not exited and by_deadline:
        return _result(
            step,
            Status.TIMED_OUT,
            f"the run deadline was reached {limit_s:.1f}s into this block (its own limit is {step.timeout_s:g}s);"
            " its process tree was ended",
            **common,
        )
    return _verdict(step, exited, block, expected, stdout_path, common)


def _observed(
    block: BlockProcess,
    paths: tuple[Path | None, ...],
    sizes: tuple[int, ...],
    command: str,
    expected: str | None,
    markers: tuple[str, ...],
) -> dict[str, object]:
    """What was measured of a block that ran, whatever its verdict; a path is None for a stream not kept."""
    stdout_path, stderr_path = (str(path) if path else None for path in paths)
    return {
        "exit_code": block.exit_code,
        "duration_s": time.monotonic() - block.started,
        "stdout_path": stdout_path,
        "stderr_path": stderr_path,
        "stdout_bytes": sizes[0],
        "stderr_bytes": sizes[1],
        "command": command,
        "expected": expected,
        "marker_found": file_contains(stderr_path, markers) if sizes[1] else None,
        "peak_rss_bytes": block.peak_rss_bytes or None,
        "cpu_s": block.cpu_s,
    }


def _verdict(
    step: Step,
    exited: bool,
    block: BlockProcess,
    expected: str | None,
    stdout_path: Path,
    common: dict[str, object],
) -> BlockResult:
    if not exited:
        return _result(
            step, Status.TIMED_OUT, f"timed out after {step.timeout_s:g}s; its process tree was ended", **common
        )
    code = block.exit_code
    if code != 0:
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
        return _result(step, Status.FAILED, how, **common)
    if step.expected is not None and expected is not None:
        failed_piece = match_file(str(stdout_path), expected, step.expected.fuzzy)
        if failed_piece is None:
            return _result(step, Status.PASSED, "output matched", **common)
        view = read_view(str(stdout_path), full_limit_bytes=FULL_LIMIT_BYTES)
        report = explain_mismatch(view.render(), expected, step.expected.fuzzy, failed_piece)
        return _result(
            step,
            Status.MISMATCH,
            f"stdout does not match the expected output from its line {report.first_unmatched_line}: {report.first_unmatched_text!r}",
            match=report,
            **common,
        )
    if step.store:
        size = os.path.getsize(stdout_path)
        with open(stdout_path, "rb") as handle:
            value = handle.read(_STORE_LIMIT_BYTES).decode("utf-8", "replace").rstrip()
        note = "" if size <= _STORE_LIMIT_BYTES else f" (first {_STORE_LIMIT_BYTES} bytes of {size})"
        return _result(step, Status.PASSED, f"stored {step.store}{note}", stored=(step.store, value), **common)
    return _result(step, Status.PASSED, "exit 0", **common)


def _run_diagnostics(
    step: Step,
    result: BlockResult,
    settings: GuideSettings,
    env: Mapping[str, str],
    options: RunOptions,
    supervisor: ProcessSupervisor,
) -> tuple[BlockResult, int | None]:
    """Run the guide's ci.diagnostics after a block failed, mismatched or timed out.

    Returns the result carrying them, and the signal number when a stop
    request cut them short (the remaining ones are then not started).
    """
    if result.status not in _DIAGNOSED or not settings.diagnostics:
        return result, None
    limit_s = settings.diagnostics_timeout_s or DEFAULT_DIAGNOSTICS_TIMEOUT_S
    if _past(options.deadline):
        # the job's own limit is close: a glimpse of each still fits in the workflow's margin, a full minute may not
        limit_s = min(limit_s, _PAST_DEADLINE_DIAGNOSTIC_S)
    directory = Path(f"{_output_stem(step, options)}.diagnostics")
    done: list[DiagnosticResult] = []
    signum: int | None = None
    for index, command in enumerate(settings.diagnostics, start=1):
        signum = supervisor.stop_requested()
        if signum is not None:
            break
        output_path = directory / f"{index}-{_slug(command)[:40]}.txt"
        tag = f"{options.block_file_prefix}{step.ordinal}-diagnostic-{index}"
        diagnostic, signum = _run_diagnostic(
            command, output_path, f"{step.name} (diagnostic {index})", tag, limit_s, env, supervisor
        )
        done.append(diagnostic)
        if signum is not None:
            break
    return dataclasses.replace(result, diagnostics=tuple(done)), signum


def _run_diagnostic(
    command: str,
    output_path: Path,
    name: str,
    tag: str,
    limit_s: float,
    env: Mapping[str, str],
    supervisor: ProcessSupervisor,
) -> tuple[DiagnosticResult, int | None]:
    """One diagnostic, supervised as a block is: its own session, a time limit, its whole tree ended."""
    # stderr joins stdout so the file reads as a terminal would show it; the file-size limit caps
    # what a runaway command can write, since its output goes straight to the file, not through us
    limit_kib = DIAGNOSTIC_OUTPUT_LIMIT_BYTES // 1024
    argv = ["bash", "-c", f"ulimit -f {limit_kib} 2>/dev/null; exec 2>&1\n{command}"]
    started = time.monotonic()
    try:
        output_path.parent.mkdir(parents=True, exist_ok=True)
        process = supervisor.start(
            argv, env=env, stdout_path=output_path, stderr_path=output_path, block_name=name, block_tag=tag
        )
    except OSError as exc:
        message = f"could not be run: {exc.strerror or exc}"
        return DiagnosticResult(command, None, 0, False, None, False, 0.0, message), None
    signum = None
    try:
        exited = supervisor.wait(process, limit_s)
    except RunInterrupted as interrupt:
        supervisor.end_tree(process)  # a stop request cuts its grace period short
        exited, signum = False, interrupt.signum
    if signum is None and (not exited or supervisor.group_alive(process)):
        # past its limit, or it left something running in the background: neither may outlive it
        supervisor.end_tree(process, grace_s=_DIAGNOSTIC_GRACE_S)
    supervisor.reap_orphans()
    (size,) = _sizes(output_path)
    capped = size >= DIAGNOSTIC_OUTPUT_LIMIT_BYTES
    code = process.exit_code if exited else None
    if signum is not None:
        message = f"interrupted by signal {signum}; its process tree was ended"
    elif not exited:
        message = f"timed out after {limit_s:g}s; its process tree was ended"
    elif capped:
        message = f"stopped at the {DIAGNOSTIC_OUTPUT_LIMIT_BYTES // (1024 * 1024)} MiB output cap"
    elif code is not None and code < 0:
        message = f"killed by signal {-code}"
    else:
        message = f"exit {code}"
    duration_s = time.monotonic() - started
    result = DiagnosticResult(
        command, str(output_path), size, capped, code, not exited and signum is None, duration_s, message
    )
    return result, signum
