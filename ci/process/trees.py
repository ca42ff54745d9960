"""Process trees: one look at every process, waiting for them to be gone, reaping our own, saying what each was."""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base import lazy_import

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_import("psutil")


__all__ = [
    "ProcessTable",
    "alive",
    "command_of",
    "describe",
    "has_children",
    "live_children",
    "pid_max",
    "start_ticks",
    "wait_gone",
]


class ProcessTable:
    """Every process at one moment, read in one pass over /proc: its parent, process group, session and start time.

    Finding a run's processes asks, of each one, for its descendants and for the
    rest of its process group. psutil's children() and a getpgid() per process
    read all of /proc again for each question, so N leftover processes cost N
    whole scans (6 s for 300 sleepers, a minute for 1000, all before the first signal);
    asked of one table, the questions cost one scan together.
    """

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}  # pid -> parent pid
        self.group: dict[int, int] = {}  # pid -> process group id
        self.session: dict[int, int] = {}  # pid -> session id
        self.started: dict[int, int] = {}  # pid -> start time, in clock ticks since boot
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            fields = _stat_fields(pid)
            if fields is None:  # gone meanwhile
                continue
            self.parent[pid], self.group[pid], self.session[pid], self.started[pid] = fields
        self._children: dict[int, list[int]] = defaultdict(list)
        self._in_group: dict[int, list[int]] = defaultdict(list)
        for pid in self.parent:
            self._index(pid)

    def _index(self, pid: int) -> None:
        self._children[self.parent[pid]].append(pid)
        self._in_group[self.group[pid]].append(pid)

    def take_in_children(self, pid: int) -> None:
        """Add the children `pid` has now that the look at /proc missed (born since)."""
        for child in _children_of(pid):
            fields = None if child in self.parent else _stat_fields(child)
            if fields is not None:
                self.parent[child], self.group[child], self.session[child], self.started[child] = fields
                self._index(child)

    def descendants(self, pid: int) -> list[int]:
        """Children, grandchildren and so on of `pid`, nearest first."""
        return self._walk(pid, {pid})[1:]

    def trees_and_groups(self, roots: Iterable[int], own_group: int) -> list[int]:
        """Each root still there, its descendants, and the rest of its process group unless that is `own_group`.

        In that order, each pid once. A root that is gone brings nothing: its
        group can no longer be read. No tree is walked twice, so roots that
        descend from one another (every descendant of the harness) cost one walk.
        """
        found: dict[int, None] = {}  # an ordered set
        walked: set[int] = set()  # every pid whose whole tree is in found
        groups_done = {own_group}  # never the harness's own group (the CI job's)
        for root in roots:
            if root not in self.parent:
                continue
            if root not in walked:
                walked.add(root)
                found.update(dict.fromkeys(self._walk(root, walked)))
            if self.group[root] not in groups_done:
                groups_done.add(self.group[root])
                found.update(dict.fromkeys(self._in_group.get(self.group[root], ())))
        return list(found)

    def _walk(self, root: int, seen: set[int]) -> list[int]:
        """`root` and its descendants not in `seen`, breadth first; adds them to `seen`."""
        queue = [root]
        for current in queue:  # grows while it is walked
            for child in self._children.get(current, ()):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        return queue


def start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (None once it is reaped): with the pid, it names one process."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[3]


def pid_max() -> int:
    """One more than the highest pid the kernel hands out (it wraps around to the lowest free ones there)."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return _PID_MAX_LIMIT


_PID_MAX_LIMIT = 4194304  # the most pid_max can be (64-bit Linux)


def _stat_fields(pid: int) -> tuple[int, int, int, int] | None:
    """(parent, process group, session, start ticks) from /proc/PID/stat; None when it cannot be read."""
    try:
        fields = _stat_words(pid)
        return int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _stat_words(pid: int) -> list[bytes]:
    """The words of /proc/PID/stat after the command's name (in parentheses, which it may itself contain):
    state ppid pgrp session ...; OSError once the process is gone."""
    return _read_proc(f"/proc/{pid}/stat").rpartition(b")")[2].split()


def _read_proc(path: str) -> bytes:
    """A small /proc file, read in one call: three system calls where a buffered open() makes eight.

    Read once per block started and once per process at every look, so it counts. A file
    the kernel makes larger than one read is read on to its end.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(descriptor, 4096)]
        while len(chunks[-1]) == 4096:
            chunks.append(os.read(descriptor, 4096))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


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


def command_of(pid: int) -> str:
    """A process's command line (its name when it has none), read straight from /proc; "?" once it is gone."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        command = " ".join(word.decode("utf-8", "replace") for word in words)
        return command or Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "?"


def has_children() -> bool:
    """Whether the harness has any child process (cheaply, from /proc; True when unsure)."""
    try:
        tasks = os.listdir("/proc/self/task")
        return any(Path(f"/proc/self/task/{tid}/children").read_text().strip() for tid in tasks)
    except OSError:
        return True


def live_children(pid: int) -> list[tuple[int, int, int]]:
    """(pid, process group, session) of every child `pid` has now that is not a zombie; one read of /proc each."""
    found = []
    for child in _children_of(pid):
        try:
            fields = _stat_words(child)
            if fields[0] not in (b"Z", b"X"):
                found.append((child, int(fields[2]), int(fields[3])))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def _children_of(pid: int) -> list[int]:
    """The children `pid` has now, as the kernel lists them for each of its threads."""
    children = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                children += [int(word) for word in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return children


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
