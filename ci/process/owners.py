"""Which block of a run each process came from: its marker, its session, its ancestors, or when it was adopted.

A block's processes carry the run's and the block's markers in their
environment, live in the block's session, or descend from its main process.
A daemon that clears its environment, starts a session of its own and is
orphaned has none of these: the harness, a child subreaper, adopts it. Blocks
run one at a time, so such an adopted process belongs to the block that was
running when it started. Only the harness's own descendants are ever
attributed this way, never a process outside its tree.

Start times come in clock ticks (10 ms), and a block that ends right after
forking a daemon leaves the next block to start in the very tick the daemon
did. Within one tick the pids tell: the kernel hands them out in turn.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Mapping, Sequence, Set

from ci.base import frozen
from ci.process.trees import ProcessTable, pid_max

__all__ = ["BlockStart", "Owners", "block_running_at", "block_tag_of", "marked_pids", "run_markers"]

_NOT_OURS = ""  # the owner of a process no block of the run started


@frozen
class BlockStart:
    """A block's main process as started: what attributes the processes it leaves to it."""

    pid: int  # also its session's id: every block starts a session of its own
    tag: str  # its marker (GUIDE_GUARD_BLOCK)
    ticks: int  # its start time in clock ticks since boot, as /proc/PID/stat gives it


class Owners:
    """The block (by marker) each process in one look at /proc came from, found once per process."""

    def __init__(
        self, table: ProcessTable, tags: Mapping[int, str], blocks: Sequence[BlockStart], ended: Set[BlockStart]
    ) -> None:
        """`ended`: blocks whose session an earlier look found gone (its id may name another session now)."""
        self.table = table
        self.tags = tags  # pid -> block marker, for every process carrying the run's marker
        self.harness = os.getpid()
        self.own_session = os.getsid(0)
        self.by_pid = {block.pid: block for block in blocks}
        self.sessions = {block.pid: block.tag for block in blocks if block not in ended}
        self.starts = sorted(blocks, key=lambda block: block.ticks)  # stable: in the order started within a tick
        self.pid_max = pid_max()
        self._known: dict[int, str] = {}

    def of(self, pid: int) -> str | None:
        """The marker of the block `pid` came from; None for a process the run did not start (or cannot place)."""
        chain = []
        current = pid
        while True:
            owner = self._known.get(current)
            if owner is None:
                owner = self._direct(current)
            if owner is not None:
                break
            chain.append(current)
            parent = self.table.parent.get(current)
            if parent == self.harness:  # orphaned, and adopted: it started while its block ran
                block = block_running_at(self.starts, current, self.table.started[current], self.pid_max)
                owner = _NOT_OURS if block is None else block.tag
                break
            if parent is None or parent <= 1:  # the root of the pid namespace, or gone: not below the harness
                owner = _NOT_OURS
                break
            current = parent
        for member in chain:  # each process is placed once, however many ask through it
            self._known[member] = owner
        return owner or None

    def _direct(self, pid: int) -> str | None:
        """The block a process names itself, by pid, marker or session; None when it does not say."""
        block = self.by_pid.get(pid)
        if block is not None and self.table.started.get(pid) == block.ticks:  # not a later process given its pid
            return block.tag
        if pid in self.tags:
            return self.tags[pid] or None
        session = self.table.session.get(pid)
        if session == self.own_session:  # the harness's own helpers (py-spy): no block's
            return _NOT_OURS
        return self.sessions.get(session) if session is not None else None


def block_running_at(starts: Sequence[BlockStart], pid: int, ticks: int, pid_max: int) -> BlockStart | None:
    """The block that was running when process `pid` started, at `ticks`: the last one started before it.

    STARTS: the run's blocks by start time, in the order started within a
    tick. None for a process older than every block. A block started in the
    process's own tick (a block that ended right after forking a daemon, and
    the next one) came before it only when its pid did: the kernel hands
    pids out in turn, wrapping around below PID_MAX, and never goes half
    the way round in one tick (10 ms), so of two pids handed out within one
    the later is the one less than half the way round ahead.
    """
    index = bisect.bisect_right(starts, ticks, key=lambda block: block.ticks)  # those started by that tick
    while index and starts[index - 1].ticks == ticks and not _not_before(pid, starts[index - 1].pid, pid_max):
        index -= 1  # started in the same tick, but after the process
    return starts[index - 1] if index else None


def _not_before(pid: int, other: int, pid_max: int) -> bool:
    """Whether the kernel gave out `pid` after `other` (or it is `other`), both within a moment (pids wrap at pid_max)."""
    return (pid - other) % pid_max < pid_max // 2


def run_markers(run_token: str, marker: str, block_marker: str) -> dict[int, str]:
    """pid -> value of `block_marker` ("" without one), for every process whose environment has marker=run_token."""
    wanted = f"{marker}={run_token}".encode()
    prefix = f"{block_marker}=".encode()
    found = {}
    for pid, variables in _environments():
        if wanted in variables:
            found[pid] = next((v[len(prefix) :] for v in variables if v.startswith(prefix)), b"").decode(
                "utf-8", "replace"
            )
    return found


def block_tag_of(pid: int, run_token: str, marker: str, block_marker: str) -> str | None:
    """The value of `block_marker` in one process's environment when it carries marker=run_token, else None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            variables = handle.read().split(b"\0")
    except OSError:
        return None
    if f"{marker}={run_token}".encode() not in variables:
        return None
    prefix = f"{block_marker}=".encode()
    return next((v[len(prefix) :].decode("utf-8", "replace") for v in variables if v.startswith(prefix)), None)


def marked_pids(markers: Mapping[str, str]) -> list[int]:
    """Pids, other than ours, whose environment holds every NAME=VALUE of markers.

    Reads /proc directly: cheaper than psutil for the common case of finding
    nothing. A process that is gone, or not ours to read, is skipped.
    """
    wanted = [f"{name}={value}".encode() for name, value in markers.items()]
    return [pid for pid, variables in _environments() if all(item in variables for item in wanted)]


def _environments() -> Iterable[tuple[int, list[bytes]]]:
    """(pid, its environment's NAME=VALUE entries) for every process but ours whose environment can be read."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:
            continue
        yield int(entry), variables
