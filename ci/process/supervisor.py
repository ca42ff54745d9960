"""Process control: the supervisor that owns every process a run starts, from spawn to teardown.

This module alone decides when a block's process is ended (spawn, trees, owners,
ending, stacks and signals are its helpers; stacks ends only the py-spy it starts). Every block runs in its own
session (so its own process group) with output going straight to files, and
carries the run's marker in its environment so that even a daemon that
double-forks and calls setsid can be found again through /proc/PID/environ;
one that also clears its environment is the harness's, a subreaper's, by
adoption, and its block's by when it started (see owners).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base import lazy_import
from ci.base.signals import StopSignals, signal_name
from ci.process.adopted import kill_adopted
from ci.process.ending import Found, Timing, end_in_rounds
from ci.process.owners import BlockStart, Owners, block_running_at, block_tag_of, marked_pids, run_markers
from ci.process.spawn import WorkdirUnenterable, become_subreaper, keep_inherited_fds, spawn_in_session
from ci.process.stacks import dump_python_stacks, stack_dump_problem
from ci.process.trees import ProcessTable, alive, command_of, has_children, pid_max, start_ticks
from ci.record.outcome import STILL_RUNNING, TrackedProcess

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_import("psutil")

__all__ = [
    "BLOCK_MARKER",
    "RUN_MARKER",
    "BlockProcess",
    "ProcessSupervisor",
    "RunInterrupted",
    "marked_pids",
]

RUN_MARKER = "GUIDE_GUARD_RUN"  # environment variable naming the run a process belongs to
BLOCK_MARKER = "GUIDE_GUARD_BLOCK"  # environment variable naming the block that started it

_FIRST_POLL_S = 0.05  # a waiting run wakes soon at first, so short blocks get a memory sample too
_POLL_S = 0.5  # and then this often, to reap orphans and sample memory
# After a stop signal, every grace period ends this long after the signal, and the wait for SIGKILLed
# processes to be gone this much later still: with the scans and the reports the whole stop fits in
# the 2 s the contract promises (GitHub Actions sends SIGKILL 7.5 s after its SIGINT).
_STOP_GRACE_S = 1.0
_STOP_REAP_S = 0.5
# A harness that comes to a tree late (a loaded machine, a long look for its processes) still gives it this long
# from its SIGTERM, within the reap time above: a block's trap gets to run, and the stop stays within its 2 s.
_STOP_LEAST_GRACE_S = 0.5
_KILL_WAIT_S = 2.0  # otherwise, how long SIGKILLed processes get to be gone (one stuck in the kernel may never go)


class RunInterrupted(Exception):
    """Raised while waiting for a block when SIGINT or SIGTERM has arrived."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum


@dataclass
class BlockProcess:
    """A running block: its Popen handle and what is measured while it runs."""

    pid: int  # also the id of its process group and session
    block_name: str
    block_tag: str  # value of BLOCK_MARKER in its environment
    started: float  # monotonic
    exit_code: int | None = None  # set when it has exited (negative: killed by that signal)
    cpu_s: float | None = None
    peak_rss_bytes: int = 0


class ProcessSupervisor:
    """Owns every process a run starts, from spawn to teardown."""

    def __init__(
        self, run_token: str, *, grace_s: float = 10.0, signals: StopSignals | None = None, workdir: str | None = None
    ) -> None:
        self.run_token = run_token
        self.workdir = workdir  # every block starts here, entered by its path (None: where the harness is)
        self.grace_s = grace_s
        self.signals = signals if signals is not None else StopSignals()  # installed by the caller, if at all
        self.subreaper = become_subreaper()
        keep_inherited_fds()
        self.blocks: list[BlockStart] = []  # every block started, in order
        self.ended_sessions: set[BlockStart] = set()  # blocks whose session a look found gone
        self.reaped: dict[int, int | None] = {}  # block pid -> exit code, when reaped while ending processes
        self.block_names: dict[str, str] = {}  # block tag -> block name
        self.active: BlockProcess | None = None

    def stop_requested(self) -> int | None:
        """The signal that asked the run to stop, once one has."""
        return self.signals.first

    def _ends_by(self, end: float, asked_at: float) -> float:
        """When a grace period meant to end at `end` ends, its processes sent SIGTERM at `asked_at`, now that a stop
        may have been asked for."""
        first = self.signals.first_at
        if first is None:
            return end
        if self.signals.hurried:
            return 0.0  # over already
        least = min(asked_at + _STOP_LEAST_GRACE_S, first + _STOP_GRACE_S + _STOP_REAP_S)
        return min(end, max(first + _STOP_GRACE_S, least))

    def _kill_wait_ends_by(self) -> float:
        """When the wait for just SIGKILLed processes to be gone ends."""
        now = time.monotonic()
        if self.signals.first_at is None:
            return now + _KILL_WAIT_S
        # a moment at least: a killed process is gone within milliseconds, unless stuck in the kernel
        return max(now + 0.05, min(now + _KILL_WAIT_S, self.signals.first_at + _STOP_GRACE_S + _STOP_REAP_S))

    # -- spawning ---------------------------------------------------------

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stdout: int,
        stderr: int,
        block_name: str,
        block_tag: str,
        stdin_path: Path | None = None,
    ) -> BlockProcess:
        """Start one block in a new session, stdin empty (or STDIN_PATH), stdout and stderr going to the files open on
        these descriptors.

        The block runs in the working directory, entered again by its path
        each time: a block that removed it and made it anew leaves the
        harness in the removed one, where every later block would fail. With
        the run's and its own marker in its environment. FileNotFoundError
        when argv[0] is not on the block's PATH (the guide's env may set its
        own); WorkdirUnenterable when the working directory is gone.
        """
        if self.workdir is not None:
            try:
                os.chdir(self.workdir)  # posix_spawn has no chdir of its own: the block inherits the harness's
            except OSError as exc:
                raise WorkdirUnenterable(self.workdir, exc) from exc
        full_env = dict(env)
        full_env[RUN_MARKER] = self.run_token
        full_env[BLOCK_MARKER] = block_tag
        pid = spawn_in_session(argv, full_env, stdout, stderr, stdin_path)
        # it is our child, not yet waited for: its start time can be read; what it orphans later started after it
        ticks = start_ticks(pid)
        self.blocks.append(BlockStart(pid, block_tag, ticks if ticks is not None else 0))
        self.block_names[block_tag] = block_name
        self.active = BlockProcess(pid, block_name, block_tag, time.monotonic())
        return self.active

    # -- waiting ----------------------------------------------------------

    def wait(self, block: BlockProcess, timeout_s: float, ends_by: Callable[[float], float] | None = None) -> bool:
        """Wait for the block's main process; True if it exited, False at the deadline.

        Wakes now and then (soon at first, then every half second) to reap
        orphans, sample the tree's memory and see whether the run was
        interrupted (then raises RunInterrupted; with `ends_by`, the deadline
        becomes ends_by(deadline) instead, asked at every wake: a ci.cleanup
        command runs through a stop, for a while). Uses a pidfd where the
        kernel has one, so a quick block is not slowed by polling.
        """
        deadline = block.started + timeout_s
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(block.pid)
        poll_s = _FIRST_POLL_S
        try:
            while True:
                signum = self.stop_requested()
                if signum is not None and ends_by is None:
                    raise RunInterrupted(signum)
                remaining = (deadline if ends_by is None else ends_by(deadline)) - time.monotonic()
                if remaining <= 0:
                    return self._collect(block, blocking=False)
                if self._exits_within(block, pidfd, min(remaining, poll_s)):
                    return self._collect(block, blocking=True)
                poll_s = min(poll_s * 2, _POLL_S)
                self.reap_orphans(exclude=block.pid)
                self._sample(block)
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _exits_within(self, block: BlockProcess, pidfd: int | None, seconds: float) -> bool:
        """True if the block's process exits within `seconds`; False at once when a stop signal comes (after it,
        with a pidfd, the wait is for the process alone: `wait` goes on only for a command meant to outlive a stop)."""
        if pidfd is not None:
            # poll, not select: a harness started with many descriptors open gets a pidfd numbered over
            # FD_SETSIZE (1024), which select() cannot watch
            watch = select.poll()
            watch.register(pidfd, select.POLLIN)
            if self.stop_requested() is None:  # readable from the first signal on: watched until then
                watch.register(self.signals.wake_fd, select.POLLIN)
            ready = watch.poll(seconds * 1000)
            return any(fd == pidfd for fd, _ in ready)
        until = time.monotonic() + seconds  # no pidfd (old kernel): poll
        while time.monotonic() < until and self.stop_requested() is None:
            if self._collect(block, blocking=False):
                return True
            time.sleep(0.01)
        return False

    def _collect(self, block: BlockProcess, *, blocking: bool) -> bool:
        """Reap the main process with wait4 to get its CPU time; True if it has exited."""
        if block.exit_code is not None:
            return True
        pid = block.pid
        try:
            waited, status, usage = os.wait4(pid, 0 if blocking else os.WNOHANG)
        except ChildProcessError:  # reaped already
            waited, status, usage = pid, 0, None
        if waited == 0:
            return False
        block.exit_code = os.waitstatus_to_exitcode(status) if usage is not None else self.reaped.get(pid)
        if usage is not None:
            # ru_maxrss is left out on purpose: Linux carries it across exec, so it
            # would report the harness's own image copied at fork, not the block's.
            block.cpu_s = usage.ru_utime + usage.ru_stime
        self.active = None
        return True

    def _sample(self, block: BlockProcess) -> None:
        """Add up the resident memory of the block's tree; keep the peak."""
        try:
            root = psutil.Process(block.pid)
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for member in members:
            with contextlib.suppress(psutil.Error):
                total += member.memory_info().rss
        block.peak_rss_bytes = max(block.peak_rss_bytes, total)

    def group_alive(self, block: BlockProcess) -> bool:
        """True while any process is left in the block's process group (a background child)."""
        try:
            os.killpg(block.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def reap_orphans(self, exclude: int | None = None) -> None:
        """Reap exited children that are not the running block (orphans re-parented to us)."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == exclude or info.si_pid == 0:
                return
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, 0)

    # -- finding and ending trees ----------------------------------------

    def _look(self, tag: str | None) -> Found:
        """The run's processes alive now (or one block's), from one look at /proc, each with its block.

        The run's: every descendant of the harness (orphans are re-parented to
        it) with the rest of each one's process group, and every process
        carrying the run's marker. One block's: those of them that came from it
        (its tree, its session, its marker, its adopted daemons: see Owners).
        The cost grows with the number of processes, not its square.
        """
        self._reap_children()  # a zombie would keep its group in being
        table = ProcessTable()
        tags = run_markers(self.run_token, RUN_MARKER, BLOCK_MARKER)
        # the scans take a while: an orphan that forks and exits over and over has a new pid by their end,
        # and is the harness's child again; the kernel lists those at once
        table.take_in_children(os.getpid())
        sessions = set(table.session.values())
        self.ended_sessions.update(block for block in self.blocks if block.pid not in sessions)
        owners = Owners(table, tags, self.blocks, self.ended_sessions)
        own_group = os.getpgid(0)
        below = table.trees_and_groups(table.descendants(os.getpid()), own_group)
        found = dict.fromkeys([*below, *tags])
        if tag is not None:
            found = {pid: None for pid in found if owners.of(pid) == tag}
        found.pop(os.getpid(), None)
        processes = []
        for pid in found:
            with contextlib.suppress(psutil.Error):  # gone since the look
                proc = psutil.Process(pid)
                if alive(proc):
                    processes.append(proc)
        came_from = {proc.pid: owners.of(proc.pid) for proc in processes}
        origins = {pid: self.block_names.get(owner or "", "?") for pid, owner in came_from.items()}
        # A group is signalled as a whole only when it is one of the harness's descendants' (a marked
        # process elsewhere, in a container say, may share its group with others). Also the group of one
        # gone since the look: it may have forked first, and the rounds go on while the group has members.
        below_set = set(below)
        groups = {table.group[pid] for pid in found if pid in below_set} - {own_group}
        return Found(processes, origins, groups, came_from)

    def _reap_children(self) -> None:
        """Reap every child that has exited, keeping a block's exit code for _collect."""
        block_pids = {block.pid for block in self.blocks}
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in block_pids:
                self.reaped[pid] = os.waitstatus_to_exitcode(status)

    def dump_stacks(self, block: BlockProcess, dump_dir: Path, *, within: Path) -> tuple[list[str], list[str]]:
        """py-spy dumps of every Python process in the block's tree, kept in DUMP_DIR under WITHIN; (paths, one-line notes).

        Then of every Python process earlier blocks left running: a block that timed out often waited on one (a
        request hung in a server started before it); the notes name each, and each of them not dumped with why.
        Skipped, or cut short, when a stop signal comes: the run must end within 2 s of it.
        """
        run = self._look(None)
        own = [proc for proc in run.processes if run.tags.get(proc.pid) == block.block_tag]
        left_by = {proc: run.origins[proc.pid] for proc in run.processes if run.tags.get(proc.pid) != block.block_tag}
        return dump_python_stacks(own, dump_dir, self.stop_requested, within=within, left_by=left_by)

    def stack_dump_problem(self) -> str | None:
        """Why stack dumps on timeout would be missing in this run (what is wrong, then the fix), or None."""
        return stack_dump_problem(self.stop_requested)

    def left_behind(self, block: BlockProcess) -> bool:
        """True while any process the block started is alive (its own, a background child, an adopted daemon)."""
        return bool(self._look(block.block_tag).processes)

    def _timing(self, grace_s: float | None) -> Timing:
        grace_end = time.monotonic() + (self.grace_s if grace_s is None else grace_s)
        return Timing(grace_end, self._ends_by, self._kill_wait_ends_by, self.signals.hurried)

    def end_tree(self, block: BlockProcess, *, grace_s: float | None = None) -> list[TrackedProcess]:
        """End all a block started: SIGTERM, a grace period, SIGKILL, looking again until none is left.

        Returns the processes ended, the block's own first (any that outlived
        it all say so). After a stop signal the grace period ends a second after it (for a tree the harness
        came to late, half a second after its SIGTERM, at most 1.5 s after the signal); after a second signal
        the tree gets SIGKILL at once.
        """
        timing = self._timing(grace_s)

        def signal_group() -> None:
            if block.exit_code is not None or block.pid in self.reaped:
                return  # reaped: its pid, so its group's id, may be another's now
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(block.pid, signal.SIGKILL if timing.hurried else signal.SIGTERM)

        ended, exit_codes = end_in_rounds(
            lambda: self._look(block.block_tag), timing, signal_group, self._reap_children
        )
        if block.exit_code is None:
            if block.pid in exit_codes:  # reaped while waiting for the tree
                block.exit_code = exit_codes[block.pid]
            # never a blocking wait here: a process stuck in the kernel (a driver call) outlives
            # SIGKILL, and the run must still end; a later reap_orphans collects it
            self._collect(block, blocking=False)
            self.active = None
        self.reap_orphans()
        return sorted(ended, key=lambda p: p.pid != block.pid)

    def end_left_behind(self, block_tag: str) -> list[TrackedProcess]:
        """End what a block that exited left running (a background server, its daemons), as end_tree would."""
        ended, _ = end_in_rounds(lambda: self._look(block_tag), self._timing(None), reap=self._reap_children)
        self.reap_orphans()
        return ended

    def teardown(self, grace_s: float | None = None) -> list[TrackedProcess]:
        """End every process of the run still alive (background servers, daemons) and list them.

        Looks again after every round of signals, so what forks meanwhile is
        ended too; a process that outlives it all is listed as still running.
        """
        self.reap_orphans()
        if not has_children() and not marked_pids({RUN_MARKER: self.run_token}):  # the usual case, seen cheaply
            return []
        ended, _ = end_in_rounds(lambda: self._look(None), self._timing(grace_s), reap=self._reap_children)
        ended = self._kill_adopted(ended)
        self.reap_orphans()
        return ended

    def _kill_adopted(self, ended: list[TrackedProcess]) -> list[TrackedProcess]:
        """After the rounds, what forks faster than they look (see adopted): ENDED, with what it ended or left."""
        still = {proc.pid for proc in ended if proc.ended_by == STILL_RUNNING}
        adopted = kill_adopted(
            self._kill_wait_ends_by(), identify=self._identify, reap=self._reap_children, passed_over=still
        )
        return adopted.merged_into(ended)

    def _identify(self, pid: int) -> tuple[str, str]:
        """A process's command line and the block it came from: by its marker, else when it started (as Owners)."""
        tag = block_tag_of(pid, self.run_token, RUN_MARKER, BLOCK_MARKER)
        ticks = start_ticks(pid) if tag is None else None
        if ticks is not None:
            starts = sorted(self.blocks, key=lambda block: block.ticks)
            block = block_running_at(starts, pid, ticks, pid_max())
            tag = None if block is None else block.tag
        return command_of(pid), self.block_names.get(tag or "", "?")
