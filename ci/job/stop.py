"""Stopping a harness the runner cannot signal: found by its pid file, else by its command line, stopped as Ctrl-C would.

A container job's steps run through `docker exec`, which passes no signal on: when the job is cancelled,
the harness would die with the container and leave no reports. A later step finds it and sends SIGTERM,
then waits, within a bound, for it to end (and so to write its reports).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from ci.pidfile import PID_FILE

__all__ = ["HARNESS_SCRIPT", "StopResult", "Stopped", "find_harness", "is_harness_command", "stop_harness"]

HARNESS_SCRIPT = "guide-guard"  # the console script that is ci.run's main
_HARNESS_MODULES = ("ci.run", "ci")  # `python -m ci` is `python -m ci.run`
_POLL_S = 0.1


class Stopped(enum.Enum):
    """How a stop ended."""

    NOTHING_RUNNING = "nothing_running"  # no harness of this output directory was running, and no report is there
    ALREADY_ENDED = "already_ended"  # none was running, and results.json is there: it had ended on its own
    WITH_REPORTS = "with_reports"  # it ended after the signal, and results.json is there
    WITHOUT_REPORTS = "without_reports"  # it ended without results.json: stopped while starting, no block ran
    STILL_RUNNING = "still_running"  # it had not ended when the wait was over


@dataclass(frozen=True)
class StopResult:
    """What a stop did, for the step's log."""

    stopped: Stopped  # how it ended
    pid: int | None  # the harness signalled; None when none was found
    notes: tuple[str, ...]  # what was found on the way (a stale pid file, a harness found by its command line)


def is_harness_command(argv: Sequence[str]) -> bool:
    """Whether ARGV starts the harness: `python [options] -m ci.run ...` or the `guide-guard` console script."""
    if any(Path(word).name == HARNESS_SCRIPT for word in argv[:2]):
        return True
    return any(word == "-m" and following in _HARNESS_MODULES for word, following in itertools.pairwise(argv))


def _output_dir_argument(argv: Sequence[str]) -> str | None:
    for index, word in enumerate(argv):
        if word == "--output-dir" and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--output-dir="):
            return word.removeprefix("--output-dir=")
    return None


def _running(process: psutil.Process) -> bool:
    """Alive and still itself (not a zombie whose parent has yet to collect it, not a new process with its pid)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _harness_of(process: psutil.Process, output_dir: Path) -> bool:
    """Whether PROCESS is a harness writing to OUTPUT_DIR (an absolute, resolved path)."""
    try:
        argv, cwd = process.cmdline(), process.cwd()
    except psutil.Error:
        return False
    given = _output_dir_argument(argv)
    return is_harness_command(argv) and given is not None and (Path(cwd) / given).resolve() == output_dir


def find_harness(output_dir: Path) -> tuple[psutil.Process | None, tuple[str, ...]]:
    """The running harness that writes to OUTPUT_DIR, and notes on how it was found.

    Its pid file first (the harness's own, removed when it exits). A harness killed outright leaves the
    file behind, and its pid may be another process's by now: that one is left alone. A harness still
    starting (its interpreter, its imports, the guide's parsing) has no pid file yet and is found by its
    command line: `--output-dir` naming OUTPUT_DIR from its working directory, so that another job's harness
    on the same host, with the same relative --output-dir in another workspace, is not taken for it.
    """
    output_dir = output_dir.resolve()
    pid_file = output_dir / PID_FILE
    notes = []
    try:
        pid = int(pid_file.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        pid = None
    if pid is not None:
        try:
            process = psutil.Process(pid)
        except psutil.Error:
            process = None
        if process is not None and _running(process) and is_harness_command(_cmdline(process)):
            return process, ()
        notes.append(f"the harness (pid {pid}) is no longer running")
    for process in psutil.process_iter():
        if process.pid != os.getpid() and _harness_of(process, output_dir) and _running(process):
            notes.append(
                f"found the harness (pid {process.pid}) by its command line: it had not written {PID_FILE} yet"
            )
            return process, tuple(notes)
    return None, tuple(notes)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def stop_harness(output_dir: Path, wait_s: float) -> StopResult:
    """Find the harness that writes to OUTPUT_DIR, send it SIGTERM and wait up to WAIT_S seconds for it to end."""
    process, notes = find_harness(output_dir)
    if process is None:
        reported = (output_dir / "results.json").is_file()
        return StopResult(Stopped.ALREADY_ENDED if reported else Stopped.NOTHING_RUNNING, None, notes)
    # it may have ended on its own meanwhile: its reports are looked for below all the same
    with contextlib.suppress(psutil.NoSuchProcess):
        process.send_signal(signal.SIGTERM)
    waited_until = time.monotonic() + wait_s
    while _running(process):
        if time.monotonic() >= waited_until:
            return StopResult(Stopped.STILL_RUNNING, process.pid, notes)
        time.sleep(_POLL_S)
    ended = Stopped.WITH_REPORTS if (output_dir / "results.json").is_file() else Stopped.WITHOUT_REPORTS
    return StopResult(ended, process.pid, notes)
