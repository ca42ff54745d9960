"""After a rehearsal: end every simulated process that outlived the run, and say which."""

from __future__ import annotations

import contextlib
import os
import signal
import time

from ci.rehearsal.model import SANDBOX_ENV, Sandbox

__all__ = ["sweep"]

_SWEEP_GRACE_S = 5.0  # simulated processes end on their own once the harness has ended the servers


def sweep(sandbox: Sandbox) -> dict[int, str]:
    """End whatever simulated process outlived the run (after a short grace); return what had to be ended."""
    deadline = time.monotonic() + _SWEEP_GRACE_S
    left = _survivors(sandbox)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _survivors(sandbox)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def _survivors(sandbox: Sandbox) -> dict[int, str]:
    """Simulated processes still running: the registered ones and any carrying the sandbox marker."""
    found: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for line in sandbox.processes.read_text(encoding="utf-8").splitlines():
            pid_text, ticks, name = line.split(" ", 2)
            pid = int(pid_text)
            if _start_ticks(pid) == ticks and _has_live_thread(pid):
                found[pid] = name
    for pid in _marked_pids(f"{SANDBOX_ENV}={sandbox.base}"):
        if _has_live_thread(pid):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as command:
                found[pid] = command.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
    return found


def _marked_pids(marker: str) -> list[int]:
    """Pids, other than ours, whose environment holds MARKER (NAME=VALUE); a process gone, or not ours to read,
    is passed over."""
    wanted, found = marker.encode(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry}/environ", "rb") as handle:
            if wanted in handle.read().split(b"\0"):
                found.append(int(entry))
    return found


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _has_live_thread(pid: int) -> bool:
    """A zombie thread group leader whose other threads still run counts as alive."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="utf-8") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    return True
        except (OSError, IndexError):
            continue
    return False
