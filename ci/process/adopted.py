"""Ending what forks faster than a look at /proc: the harness's own children, killed as fast as they are listed.

A process that forks and exits over and over, starting a session of its
own each time, leaves no group behind and has a new pid by the end of any
whole look at /proc (ending's rounds), so those rounds can find nothing
while it runs on. But the harness is a child subreaper: every such
generation, once its parent has exited, is the harness's child, and the
kernel lists the harness's children at once. So the children are listed
stopped (SIGSTOP: no more forks), named, and sent SIGKILL, again and
again, a process group with them when it is theirs, until there are none (a fork that a SIGKILL meets is undone, a
child forked before it is listed next time), or until the time is up:
what is left then is still running, and said to be. The process
supervisor decides when; this only does it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ci.process.trees import live_children
from ci.record.outcome import STILL_RUNNING, TrackedProcess

__all__ = ["Adopted", "kill_adopted"]

_MOST_PAUSE_S = 0.01  # between lists, while they find only what was sent SIGKILL already (stuck in the kernel)
_EMPTY_LOOKS = 3  # empty lists in a row that end the search


@dataclass
class Adopted:
    """What kill_adopted did: each child it sent SIGKILL, and those still alive at its end."""

    killed: dict[int, tuple[str, str]] = field(default_factory=dict)  # pid -> (command, block it came from)
    # (a process still alive at the end was sent SIGKILL too, unless the time was up when it was first seen)
    left: set[int] = field(default_factory=set)  # still alive when the time was up

    def merged_into(self, ended: list[TrackedProcess]) -> list[TrackedProcess]:
        """ENDED (what the rounds before listed) with what this found: a process left alive as still running."""
        merged = [
            dataclasses.replace(proc, ended_by=STILL_RUNNING) if proc.pid in self.left else proc for proc in ended
        ]
        listed = {proc.pid for proc in ended}
        for pid, (command, started_by) in self.killed.items():
            if pid not in listed:
                ended_by = STILL_RUNNING if pid in self.left else "SIGKILL"
                merged.append(TrackedProcess(pid=pid, command=command, started_by=started_by, ended_by=ended_by))
        return merged


def kill_adopted(
    ends_by: float,
    *,
    identify: Callable[[int], tuple[str, str]],
    reap: Callable[[], None],
    passed_over: set[int],
) -> Adopted:
    """SIGKILL every child of the harness (not in its own session: its helpers; not in PASSED_OVER) until none is left.

    IDENTIFY gives a process's command and block, asked once per process,
    before its SIGKILL; REAP reaps the harness's exited children. Returns
    by ENDS_BY (monotonic) at the latest.
    """
    me, own_group, own_session = os.getpid(), os.getpgid(0), os.getsid(0)
    done = Adopted()
    pause_s = 0.0
    empty_looks = 0
    while True:
        reap()  # a zombie is listed as the harness's child, and keeps its group in being
        children = [
            (pid, group)
            for pid, group, session in live_children(me)
            if session != own_session and pid not in passed_over
        ]
        if not children:
            # the kernel's list of children can skip one while others leave it during the read: only several
            # empty looks in a row, a moment apart, mean that none is left
            empty_looks += 1
            if empty_looks >= _EMPTY_LOOKS or time.monotonic() >= ends_by:
                return done
            time.sleep(_MOST_PAUSE_S)
            continue
        empty_looks = 0
        if time.monotonic() >= ends_by:
            done.left = {pid for pid, _ in children}
            done.killed.update({pid: identify(pid) for pid in done.left if pid not in done.killed})
            return done
        new = [pid for pid, _ in children if pid not in done.killed]
        for pid, group in children:  # stopped first: no fork, and still there to say what it is
            _send(pid, group, own_group, signal.SIGSTOP)
        for pid in new:
            done.killed[pid] = identify(pid)
        for pid, group in children:
            _send(pid, group, own_group, signal.SIGKILL)
        # nothing new: what is listed is dying, or stuck in the kernel (it may never go); no busy loop
        pause_s = 0.0 if new else min(max(pause_s * 2, 0.001), _MOST_PAUSE_S)
        time.sleep(pause_s)


def _send(pid: int, group: int, own_group: int, signum: int) -> None:
    """SIGNUM to the process, and to its whole group when it leads one (what it forked since is in it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group == pid and group != own_group:
            os.killpg(group, signum)
        else:
            os.kill(pid, signum)
