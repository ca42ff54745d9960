"""Process trees: waiting for processes to be gone, reaping our own, saying what each one was."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

__all__ = ["alive", "describe", "has_children", "wait_gone"]


def wait_gone(
    members: list[psutil.Process], ends_by: Callable[[], float], exit_codes: dict[int, int | None]
) -> list[psutil.Process]:
    """Wait until every member is gone or the time is up; those still alive.

    `ends_by` gives the end (monotonic), asked again at every look: a stop
    signal that comes meanwhile moves it closer. A zombie counts as gone.
    Our own children (the block's process, orphans re-parented to the
    harness) are reaped here, their exit codes kept in `exit_codes`. Unlike
    psutil.wait_procs, which waits up to 1/N s on each of N processes in
    turn and never reaps a process that became our child after it started
    waiting, this notices every exit within a few milliseconds.
    """
    pause_s = 0.001
    while True:
        still = []
        for proc in members:
            try:
                waited, status = os.waitpid(proc.pid, os.WNOHANG)
            except ChildProcessError:  # not our child: a zombie is for its parent to reap
                if alive(proc):
                    still.append(proc)
                continue
            if waited:
                exit_codes[proc.pid] = os.waitstatus_to_exitcode(status)
            else:
                still.append(proc)
        members = still
        if not members or time.monotonic() >= ends_by():
            return members
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.02)


def describe(members: Iterable[psutil.Process]) -> dict[int, str]:
    """pid -> command line (or name) of each process that can still say."""
    described = {}
    for proc in members:
        with contextlib.suppress(psutil.Error):
            described[proc.pid] = " ".join(proc.cmdline()) or proc.name()
    return described


def has_children() -> bool:
    """Whether the harness has any child process (cheaply, from /proc; True when unsure)."""
    try:
        tasks = os.listdir("/proc/self/task")
        return any(Path(f"/proc/self/task/{tid}/children").read_text().strip() for tid in tasks)
    except OSError:
        return True


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
