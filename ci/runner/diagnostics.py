"""The guide's ci.diagnostics: bash commands run after a block failed, mismatched or timed out, supervised as blocks are."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ci.base.files import create_fresh
from ci.base.signals import exit_words, signal_name
from ci.guide.model import GuideSettings, Status
from ci.process.supervisor import ProcessSupervisor, RunInterrupted
from ci.record.outcome import BlockResult, DiagnosticResult
from ci.runner.outputs import file_sizes, slug
from ci.runner.predating import files_named, predating_files

__all__ = [
    "DEFAULT_DIAGNOSTICS_TIMEOUT_S",
    "DIAGNOSTIC_OUTPUT_LIMIT_BYTES",
    "command_limit_s",
    "run_diagnostics",
    "run_supervised",
]

DEFAULT_DIAGNOSTICS_TIMEOUT_S = 60.0  # each ci.diagnostics command's limit unless ci.diagnostics_timeout says
DIAGNOSTIC_OUTPUT_LIMIT_BYTES = 1024 * 1024  # a diagnostic printing more is stopped there (RLIMIT_FSIZE)
_DIAGNOSED = (Status.FAILED, Status.MISMATCH, Status.TIMED_OUT)  # statuses after which diagnostics run
_NEAR_DEADLINE_DIAGNOSTIC_S = 10.0  # the least a diagnostic gets near or past --deadline
_DIAGNOSTIC_GRACE_S = 2.0  # SIGTERM to SIGKILL for a diagnostic past its limit: it holds up the report


def run_diagnostics(
    result: BlockResult,
    settings: GuideSettings,
    *,
    stem: str,
    output_dir: Path,
    tag: str,
    deadline: float | None,
    env: Mapping[str, str],
    supervisor: ProcessSupervisor,
    started_at: float | None = None,
) -> tuple[BlockResult, int | None]:
    """Run the guide's ci.diagnostics after a block failed, mismatched or timed out.

    `stem` is the block's output stem (the outputs go to STEM.diagnostics/, new files under `output_dir`),
    `tag` its marker value, `deadline` the run's (--deadline, monotonic).
    Returns the result carrying them, and the signal number when a stop
    request cut them short (the remaining ones are then not started).
    Each names the files its words name (ci.runner.predating) that were
    last modified before started_at (the guide's start, epoch seconds).
    """
    if result.status not in _DIAGNOSED or not settings.diagnostics:
        return result, None
    own_limit_s = settings.diagnostics_timeout_s or DEFAULT_DIAGNOSTICS_TIMEOUT_S
    directory = Path(f"{stem}.diagnostics")
    done: list[DiagnosticResult] = []
    signum: int | None = None
    for index, command in enumerate(settings.diagnostics, start=1):
        signum = supervisor.stop_requested()
        if signum is not None:
            break
        output_path = directory / f"{index}-{slug(command)[:40]}.txt"
        name = f"{result.step.name} (diagnostic {index})"
        limit_s = command_limit_s(own_limit_s, deadline)
        diagnostic, signum = run_supervised(
            command, (output_path, output_dir), name, f"{tag}-diagnostic-{index}", limit_s, env, supervisor
        )
        if started_at is not None:
            named = files_named(command, os.getcwd(), env.get("HOME"))  # the blocks' working directory
            diagnostic = dataclasses.replace(diagnostic, predating=predating_files(named, started_at))
        done.append(diagnostic)
        if signum is not None:
            break
    return dataclasses.replace(result, diagnostics=tuple(done)), signum


def command_limit_s(own_limit_s: float, deadline: float | None) -> float:
    """One diagnostic's (or cleanup's) limit, as it starts: its own, but no more than the time left to the deadline (10 s at least).

    Near the deadline the job's own limit is close: a glimpse of each still
    fits in the workflow's margin, a full minute each may not.
    """
    if deadline is None:
        return own_limit_s
    return min(own_limit_s, max(_NEAR_DEADLINE_DIAGNOSTIC_S, deadline - time.monotonic()))


def run_supervised(
    command: str,
    output: tuple[Path, Path],  # the file, and the output directory it is made under
    name: str,
    tag: str,
    limit_s: float,
    env: Mapping[str, str],
    supervisor: ProcessSupervisor,
    *,
    ends_by: Callable[[float], float] | None = None,
) -> tuple[DiagnosticResult, int | None]:
    """One command of the guide's (a diagnostic, a cleanup), supervised as a block is: its own session, a time
    limit, its whole tree ended.

    A stop request ends it and is returned, unless `ends_by` is given: then
    it runs through a stop, until ends_by(its own end), asked again as it
    runs (a cleanup: a stop shortens its time, ends nothing at once).
    """
    # stderr joins stdout so the file reads as a terminal would show it; the file-size limit caps
    # what a runaway command can write, since its output goes straight to the file, not through us
    limit_kib = DIAGNOSTIC_OUTPUT_LIMIT_BYTES // 1024
    argv = ["bash", "-c", f"ulimit -f {limit_kib} 2>/dev/null; exec 2>&1\n{command}"]
    started = time.monotonic()
    output_path, output_dir = output
    try:
        descriptor = create_fresh(output_path, within=output_dir)
        try:
            process = supervisor.start(
                argv, env=env, stdout=descriptor, stderr=descriptor, block_name=name, block_tag=tag
            )
        finally:
            os.close(descriptor)
    except OSError as exc:
        message = f"could not be run: {exc.strerror or exc}"
        return DiagnosticResult(command, None, 0, False, None, False, 0.0, message), None
    signum = None
    try:
        exited = supervisor.wait(process, limit_s, ends_by)
    except RunInterrupted as interrupt:
        supervisor.end_tree(process)  # a stop request cuts its grace period short
        exited, signum = False, interrupt.signum
    if signum is None and (not exited or supervisor.left_behind(process)):
        # past its limit, or it left something running in the background: neither may outlive it
        supervisor.end_tree(process, grace_s=_DIAGNOSTIC_GRACE_S)
    supervisor.reap_orphans()
    (size,) = file_sizes(output_path)
    capped = size >= DIAGNOSTIC_OUTPUT_LIMIT_BYTES
    code = process.exit_code if exited else None
    timed_out = not exited and signum is None
    duration_s = time.monotonic() - started
    if timed_out and supervisor.stop_requested() is not None and duration_s < limit_s:  # ends_by cut it short
        message = "stopped: the run was stopping and its time after the stop signal was up; its process tree was ended"
    else:
        message = _diagnostic_message(signum, exited, limit_s, capped, code)
    return DiagnosticResult(command, str(output_path), size, capped, code, timed_out, duration_s, message), signum


def _diagnostic_message(signum: int | None, exited: bool, limit_s: float, capped: bool, code: int | None) -> str:
    if signum is not None:
        return f"interrupted by {signal_name(signum)}; its process tree was ended"
    if not exited:
        return f"timed out after {round(limit_s, 1):g}s; its process tree was ended"
    if capped:
        return f"stopped at the {DIAGNOSTIC_OUTPUT_LIMIT_BYTES // (1024 * 1024)} MiB output cap"
    return exit_words(code)
