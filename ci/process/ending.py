"""Ending processes that may fork while they are ended: rounds of look, signal, wait, until none is left.

One look and one round of signals is not enough: a process that ignores
SIGTERM can fork all through the grace period, and what it forked is not in
the look that its SIGKILL was sent from. So every round looks again, sends
SIGTERM to what is new during the grace period and SIGKILL to all that is left
after it, and waits; the rounds end when a look finds nothing, or when the
SIGKILLed processes have had their time (then what is left is reported as
still running, not as ended). SIGKILL also goes to each process group found
among the harness's descendants as a whole: a process that forks and exits
over and over gets a new pid each time, but cannot leave its group. The
process supervisor decides when; this only does it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ci.base import frozen, lazy_import
from ci.process.trees import describe, wait_gone
from ci.record.outcome import STILL_RUNNING, TrackedProcess

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_import("psutil")

__all__ = ["Found", "Timing", "end_in_rounds"]

_LOOK_EVERY_S = 0.25  # during the grace period, how often to look for processes forked meanwhile
_KILL_LOOK_EVERY_S = 0.1  # after it, while SIGKILLed processes have time to go
_LEAST_BETWEEN_LOOKS_S = 0.05  # a process forking without pause must not turn the rounds into a busy loop
_LAST_KILL_WAIT_S = 0.05  # for what the last look found, once the wait for SIGKILLed processes is over
_MOST_KILL_ROUNDS = 50  # a bound on the rounds after the grace period, besides their time


@dataclass
class Found:
    """One look at the processes to end."""

    processes: list[psutil.Process]  # alive at the look
    origins: Mapping[int, str]  # pid -> the block it came from ("?" when unknown)
    groups: set[int] = field(default_factory=set)  # process groups wholly theirs: SIGKILL goes to each as a whole
    tags: Mapping[int, str | None] = field(
        default_factory=dict
    )  # pid -> the tag of the block it came from (None: unknown)


@frozen
class Timing:
    """When the grace period and the wait for SIGKILLed processes end, as the supervisor rules."""

    grace_end: float  # monotonic, before a stop signal moves it
    # the end a grace period meant to end at the first float has now, its processes sent SIGTERM at the second
    ends_by: Callable[[float, float], float]
    kill_wait_end: Callable[[], float]  # when processes SIGKILLed now must be gone by
    hurried: bool  # SIGKILL at once, no grace period


@dataclass
class _Rounds:
    """What the rounds have done so far."""

    seen: dict[int, psutil.Process] = field(default_factory=dict)  # every process found, by pid
    described: dict[int, str] = field(default_factory=dict)
    origins: dict[int, str] = field(default_factory=dict)
    termed: set[int] = field(default_factory=set)  # sent SIGTERM
    killed: set[int] = field(default_factory=set)  # sent SIGKILL
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    kill_end: float | None = None  # set by the first round of SIGKILL
    kill_rounds: int = 0

    def note(self, found: Found) -> None:
        """Take in what a look found (a reused pid is a new process)."""
        new = [proc for proc in found.processes if self.seen.get(proc.pid) != proc]
        for proc in new:
            self.seen[proc.pid] = proc
            self.origins[proc.pid] = found.origins.get(proc.pid, "?")
            self.termed.discard(proc.pid)
            self.killed.discard(proc.pid)
        self.described.update(describe(new))  # before the signal, while they can still say what they are

    def terminate(self, found: Found, grace_end: Callable[[], float]) -> None:
        """SIGTERM to what was found that has not had it; wait for them until the grace end or the next look."""
        for proc in found.processes:
            if proc.pid not in self.termed:
                self.termed.add(proc.pid)
                with contextlib.suppress(psutil.Error):
                    proc.terminate()
        look_at = time.monotonic() + _LOOK_EVERY_S
        wait_gone(found.processes, lambda: min(grace_end(), look_at), self.exit_codes)

    def kill(self, found: Found, wait_s: float) -> list[psutil.Process]:
        """SIGKILL to every process found, and to each of their groups as a whole (which no fork escapes).

        Waits up to wait_s for them to be gone; those still alive then.
        """
        for group in found.groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for proc in found.processes:
            with contextlib.suppress(psutil.Error):
                proc.kill()
            self.killed.add(proc.pid)
        end = time.monotonic() + wait_s
        return wait_gone(found.processes, lambda: end, self.exit_codes)

    def tracked(self, left: list[psutil.Process]) -> list[TrackedProcess]:
        """Every process found, in the order found, ended_by its last signal or STILL_RUNNING if in `left`."""
        still = {proc.pid for proc in left}
        return [
            TrackedProcess(
                pid=pid,
                command=self.described.get(pid, "?"),
                started_by=self.origins[pid],
                ended_by=STILL_RUNNING if pid in still else ("SIGKILL" if pid in self.killed else "SIGTERM"),
            )
            for pid in self.seen
        ]


def end_in_rounds(
    look: Callable[[], Found],
    timing: Timing,
    first: Callable[[], None] = lambda: None,
    reap: Callable[[], None] = lambda: None,
) -> tuple[list[TrackedProcess], dict[int, int | None]]:
    """End what `look` finds, looking again until it finds nothing; the processes and our children's exit codes.

    `first` runs once, after the first look and before its signals (a signal to
    a block's whole group); `reap` reaps the caller's exited children (a zombie
    would keep its group in being). Each process is listed once, in the order found,
    ended_by the last signal sent to it, or STILL_RUNNING when the last look
    still found it alive.
    """
    rounds = _Rounds()
    found = _looked(look(), set(), reap)
    rounds.note(found)
    first()
    asked = time.monotonic()  # SIGTERM to the group (or in the first round): a grace after a stop counts from it too
    left: list[psutil.Process] = []
    while found.processes or found.groups:
        round_start = time.monotonic()
        if not timing.hurried and round_start < timing.ends_by(timing.grace_end, asked):
            rounds.terminate(found, lambda: timing.ends_by(timing.grace_end, asked))
        else:
            if rounds.kill_end is None:
                rounds.kill_end = timing.kill_wait_end()
            if rounds.kill_rounds >= _MOST_KILL_ROUNDS or round_start >= rounds.kill_end:
                # out of time: what a moment after its SIGKILL is still there is reported as still running
                left = rounds.kill(found, _LAST_KILL_WAIT_S)
                break
            rounds.kill_rounds += 1
            rounds.kill(found, min(rounds.kill_end - round_start, _KILL_LOOK_EVERY_S))
        time.sleep(max(0.0, round_start + _LEAST_BETWEEN_LOOKS_S - time.monotonic()))
        found = _looked(look(), found.groups, reap)
        rounds.note(found)
    return rounds.tracked(left), rounds.exit_codes


def _looked(found: Found, groups_before: set[int], reap: Callable[[], None]) -> Found:
    """What a look found; when it found no process, the groups still in being that it or the look before found.

    A look can miss a process that forks and exits over and over (a new pid each
    time) while /proc is read; its process group it cannot leave. A group with
    members is one more round's (its id is not reused while it has a member, nor
    in the moment since the look).
    """
    if not found.processes:
        reap()
        found.groups = {group for group in found.groups | groups_before if _has_members(group)}
    return found


def _has_members(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
