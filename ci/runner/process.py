"""Process control: the supervisor that owns every process a run starts, from spawn to teardown.

This module alone decides when a block's process is ended (spawn, trees,
stacks and signals are its helpers; stacks ends only the py-spy it starts). Every block runs in its own
session (so its own process group) with output going straight to files, and
carries the run's marker in its environment so that even a daemon that
double-forks and calls setsid can be found again through /proc/PID/environ.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from ci.core.model import TrackedProcess
from ci.runner.signals import StopSignals
from ci.runner.spawn import become_subreaper, keep_inherited_fds, spawn_in_session
from ci.runner.stacks import dump_python_stacks, stack_dump_problem
from ci.runner.trees import ProcessTable, alive, describe, has_children, wait_gone

__all__ = ["BLOCK_MARKER", "RUN_MARKER", "BlockProcess", "ProcessSupervisor", "RunInterrupted", "marked_pids"]

RUN_MARKER = "GUIDE_GUARD_RUN"  # environment variable naming the run a process belongs to
BLOCK_MARKER = "GUIDE_GUARD_BLOCK"  # environment variable naming the block that started it

_FIRST_POLL_S = 0.05  # a waiting run wakes soon at first, so short blocks get a memory sample too
_POLL_S = 0.5  # and then this often, to reap orphans and sample memory
# After a stop signal, every grace period ends this long after the signal, and the wait for SIGKILLed
# processes to be gone this much later still: with the scans and the reports the whole stop fits in
# the 2 s the contract promises (GitHub Actions sends SIGKILL 7.5 s after its SIGINT).
_STOP_GRACE_S = 1.0
_STOP_REAP_S = 0.5
_KILL_WAIT_S = 2.0  # otherwise, how long SIGKILLed processes get to be gone (one stuck in the kernel may never go)


class RunInterrupted(Exception):
    """Raised while waiting for a block when SIGINT or SIGTERM has arrived."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
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

    def __init__(self, run_token: str, *, grace_s: float = 10.0, signals: StopSignals | None = None) -> None:
        self.run_token = run_token
        self.grace_s = grace_s
        self.signals = signals if signals is not None else StopSignals()  # installed by the caller, if at all
        self.subreaper = become_subreaper()
        keep_inherited_fds()
        self.started_by: dict[int, str] = {}  # pid -> block name, for every process seen
        self.block_names: dict[str, str] = {}  # block tag -> block name
        self.active: BlockProcess | None = None

    def stop_requested(self) -> int | None:
        """The signal that asked the run to stop, once one has."""
        return self.signals.first

    def _ends_by(self, end: float) -> float:
        """When a grace period meant to end at `end` ends, now that a stop may have been asked for."""
        if self.signals.first_at is None:
            return end
        if self.signals.hurried:
            return 0.0  # over already
        return min(end, self.signals.first_at + _STOP_GRACE_S)

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
        stdout_path: Path,
        stderr_path: Path,
        block_name: str,
        block_tag: str,
    ) -> BlockProcess:
        """Start one block in a new session, stdin empty, stdout and stderr going to files.

        The block runs in the harness's working directory (the command line
        moves there first), with the run's and its own marker in its environment.
        FileNotFoundError when argv[0] is not on the block's PATH (the guide's env may set its own).
        """
        full_env = dict(env)
        full_env[RUN_MARKER] = self.run_token
        full_env[BLOCK_MARKER] = block_tag
        pid = spawn_in_session(argv, full_env, stdout_path, stderr_path)
        self.started_by[pid] = block_name
        self.block_names[block_tag] = block_name
        self.active = BlockProcess(pid, block_name, block_tag, time.monotonic())
        return self.active

    # -- waiting ----------------------------------------------------------

    def wait(self, block: BlockProcess, timeout_s: float) -> bool:
        """Wait for the block's main process; True if it exited, False at the deadline.

        Wakes now and then (soon at first, then every half second) to reap
        orphans, sample the tree's memory and see whether the run was
        interrupted (then raises RunInterrupted). Uses a pidfd where the kernel
        has one, so a quick block is not slowed by polling.
        """
        deadline = block.started + timeout_s
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(block.pid)
        poll_s = _FIRST_POLL_S
        try:
            while True:
                signum = self.stop_requested()
                if signum is not None:
                    raise RunInterrupted(signum)
                remaining = deadline - time.monotonic()
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
        """True if the block's process exits within `seconds`; False at once when a stop signal comes."""
        if pidfd is not None:
            # poll, not select: a harness started with many descriptors open gets a pidfd numbered over
            # FD_SETSIZE (1024), which select() cannot watch
            watch = select.poll()
            watch.register(pidfd, select.POLLIN)
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
        except ChildProcessError:
            waited, status, usage = pid, 0, None
        if waited == 0:
            return False
        block.exit_code = os.waitstatus_to_exitcode(status) if usage is not None else None
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

    def _members(
        self, block_tag: str | None, roots: Iterable[int] = (), table: ProcessTable | None = None
    ) -> list[psutil.Process]:
        """Processes of this run (or of one block): by marker, process group, or descent.

        Every root's tree and group come from one look at /proc (`table`, else
        a new one), so the cost grows with the number of processes, not its square.
        """
        table = ProcessTable() if table is None else table
        found = dict.fromkeys(table.trees_and_groups(roots, os.getpgid(0)))
        found.update(dict.fromkeys(self._marked_pids(block_tag)))
        found.pop(os.getpid(), None)
        members = []
        for pid in found:
            with contextlib.suppress(psutil.Error):  # gone since the look
                members.append(psutil.Process(pid))
        return members

    def _marked_pids(self, block_tag: str | None) -> list[int]:
        """Pids whose environment carries this run's marker (and this block's, if given).

        Found through /proc, so daemons that left their process group are found too.
        """
        markers = {RUN_MARKER: self.run_token}
        if block_tag is not None:
            markers[BLOCK_MARKER] = block_tag
        return marked_pids(markers)

    def dump_stacks(self, block: BlockProcess, dump_dir: Path) -> tuple[list[str], list[str]]:
        """py-spy dumps of every Python process in the block's tree; (paths, one-line notes).

        Skipped, or cut short, when a stop signal comes: the run must end within 2 s of it.
        """
        return dump_python_stacks(self._members(block.block_tag, [block.pid]), dump_dir, self.stop_requested)

    def stack_dump_problem(self) -> str | None:
        """Why stack dumps on timeout would be missing in this run (what is wrong, then the fix), or None."""
        return stack_dump_problem(self.stop_requested)

    def end_tree(self, block: BlockProcess, *, grace_s: float | None = None) -> list[TrackedProcess]:
        """End a block's whole tree: SIGTERM, a grace period, SIGKILL; then check nothing is left.

        Returns the processes ended, the block's own first. After a stop
        signal the grace period ends a second after it; after a second
        signal the tree gets SIGKILL at once.
        """
        members = self._members(block.block_tag, [block.pid])
        described = describe(members)  # before the signal, while they can still say what they are
        hurried = self.signals.hurried
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(block.pid, signal.SIGKILL if hurried else signal.SIGTERM)
        grace = self.grace_s if grace_s is None else grace_s
        ended, exit_codes = self._terminate(
            members, grace, origin=block.block_name, described=described, hurried=hurried
        )
        # a last look: whatever the tree forked during the grace period goes too
        known = {proc.pid for proc in members}
        stragglers = [p for p in self._members(block.block_tag, [block.pid]) if p.pid not in known and alive(p)]
        if stragglers:
            more, more_codes = self._terminate(stragglers, 0.0, origin=block.block_name)
            ended += more
            exit_codes.update(more_codes)
        if block.exit_code is None:
            if block.pid in exit_codes:  # reaped while waiting for the tree
                block.exit_code = exit_codes[block.pid]
            # never a blocking wait here: a process stuck in the kernel (a driver call) outlives
            # SIGKILL, and the run must still end; a later reap_orphans collects it
            self._collect(block, blocking=False)
            self.active = None
        self.reap_orphans()
        return sorted(ended, key=lambda p: p.pid != block.pid)

    def _terminate(
        self,
        members: list[psutil.Process],
        grace_s: float,
        *,
        origin: str | None = None,
        described: dict[int, str] | None = None,
        hurried: bool | None = None,
    ) -> tuple[list[TrackedProcess], dict[int, int | None]]:
        """SIGTERM, wait up to grace_s, SIGKILL what is left; the ended processes and their exit codes.

        A stop signal cuts the grace period short (see _ends_by), even one
        that arrives while it runs; after a second signal (`hurried`, unless
        the caller already signalled the group, then it says how) every member
        gets SIGKILL at once.
        """
        described = describe(members) if described is None else described
        origins = {proc.pid: origin or self._origin(proc) for proc in members}
        hurried = self.signals.hurried if hurried is None else hurried
        # hurried, each is sent SIGKILL, or was by the caller's signal to its group if already gone
        killed = {proc.pid for proc in members} if hurried else set()
        for proc in members:
            with contextlib.suppress(psutil.Error):
                if hurried:
                    proc.kill()
                else:
                    proc.terminate()
        exit_codes: dict[int, int | None] = {}
        grace_end = time.monotonic() + grace_s
        alive = wait_gone(members, lambda: self._ends_by(grace_end), exit_codes)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.add(proc.pid)
        if alive:
            kill_end = self._kill_wait_ends_by()
            wait_gone(alive, lambda: kill_end, exit_codes)
        tracked = [
            TrackedProcess(
                pid=proc.pid,
                command=described.get(proc.pid, "?"),
                started_by=origins[proc.pid],
                ended_by="SIGKILL" if proc.pid in killed else "SIGTERM",
            )
            for proc in members
        ]
        return tracked, exit_codes

    def _origin(self, proc: psutil.Process) -> str:
        if proc.pid in self.started_by:
            return self.started_by[proc.pid]
        try:
            tag = proc.environ().get(BLOCK_MARKER, "")
        except Exception:  # gone or unreadable: the origin is only informative
            tag = ""
        return self.block_names.get(tag, "?")

    def teardown(self, grace_s: float | None = None) -> list[TrackedProcess]:
        """End every process of the run still alive (background servers, daemons) and list them."""
        self.reap_orphans()
        if not self._marked_pids(None) and not has_children():  # the usual case, seen cheaply from /proc
            return []
        # Besides the marker: every descendant of the harness. Orphaned daemons are re-parented
        # to it (it is a subreaper), and this holds even if a process dropped or lost its environment.
        table = ProcessTable()
        members = [p for p in self._members(None, table.descendants(os.getpid()), table) if alive(p)]
        ended, _ = self._terminate(members, self.grace_s if grace_s is None else grace_s)
        self.reap_orphans()
        return ended


def marked_pids(markers: Mapping[str, str]) -> list[int]:
    """Pids, other than ours, whose environment holds every NAME=VALUE of markers.

    Reads /proc directly: cheaper than psutil for the common case of finding
    nothing. A process that is gone, or not ours to read, is skipped.
    """
    wanted = [f"{name}={value}".encode() for name, value in markers.items()]
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:
            continue
        if all(item in variables for item in wanted):
            pids.append(int(entry))
    return pids
