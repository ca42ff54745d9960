"""Process control: spawning blocks, timeouts, stack dumps, signals, reaping and teardown.

This module alone decides when a process is ended. Every block runs in its own
session (so its own process group) with output going straight to files, and
carries the run's marker in its environment so that even a daemon that
double-forks and calls setsid can be found again through /proc/PID/environ.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from ci.core.model import TrackedProcess

if TYPE_CHECKING:
    import psutil

__all__ = [
    "BLOCK_MARKER",
    "RUN_MARKER",
    "BlockProcess",
    "ProcessSupervisor",
    "RunInterrupted",
    "StopSignals",
    "ptrace_refusal",
]

RUN_MARKER = "GUIDE_GUARD_RUN"  # environment variable naming the run a process belongs to
BLOCK_MARKER = "GUIDE_GUARD_BLOCK"  # environment variable naming the block that started it
PY_SPY_ENV = "GUIDE_GUARD_PY_SPY"  # path of the py-spy to use, when not the one installed with the harness

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
_RESTORED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name))
_FIRST_POLL_S = 0.05  # a waiting run wakes soon at first, so short blocks get a memory sample too
_POLL_S = 0.5  # and then this often, to reap orphans and sample memory
_DUMP_TIMEOUT_S = 15.0  # per py-spy call
_DUMP_BUDGET_S = 45.0  # for all dumps of one timeout, so a hung dump never delays the kill much
# After a stop signal, every grace period ends this long after the signal, and the wait for SIGKILLed
# processes to be gone this much later still: with the scans and the reports the whole stop fits in
# the 2 s the contract promises (GitHub Actions sends SIGKILL 7.5 s after its SIGINT).
_STOP_GRACE_S = 1.0
_STOP_REAP_S = 0.5
_KILL_WAIT_S = 2.0  # otherwise, how long SIGKILLed processes get to be gone (one stuck in the kernel may never go)
_OUTPUT_POLL_S = 0.05  # how often a short helper command (py-spy) is checked for a stop request
_TRIAL_DUMP_TIMEOUT_S = 5.0
_CAP_SYS_PTRACE = 19  # from <linux/capability.h>
_VFS_CAP_FLAGS_EFFECTIVE = 0x1  # from <linux/capability.h>: a file capability raised at exec
_PERMISSION_WORDS = re.compile(r"permission denied|operation not permitted|EPERM|EACCES|SYS_PTRACE", re.IGNORECASE)
_FIX_CAPABILITY = (
    "add --cap-add SYS_PTRACE to the job container's options (docs/ci.md), or give the harness CAP_SYS_PTRACE"
)


def _become_subreaper() -> bool:
    """Ask Linux to re-parent orphans of our descendants to us, so we can reap them."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _keep_inherited_fds() -> None:
    """Pass no descriptor the harness inherited (beyond stdin, stdout, stderr) on to blocks.

    As subprocess's close_fds does for the engine the guides were written for:
    a runner's pipe handed down to a block's background server would keep
    the job step waiting on it. Descriptors Python opens are not inherited anyway.
    """
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
                os.set_inheritable(fd, False)


class StopSignals:
    """The run's stop requests: SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session), counted.

    The first asks the run to stop: the running block is ended, every grace
    period is cut to about a second, and the reports are written. A second
    one asks it to hurry: what is left gets SIGKILL at once. The handler only
    records, so that a signal never cuts a report in half, and writes a byte
    to a pipe so that a wait in select() wakes at once instead of at its next poll.
    """

    def __init__(self) -> None:
        self.first: int | None = None  # the first signal's number: the run's exit status is 128 + it
        self.first_at: float | None = None  # when it came (monotonic)
        self.count = 0
        self.wake_fd, self._wake_write = os.pipe()  # wake_fd is readable from the first signal on
        os.set_blocking(self._wake_write, False)

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.first is None:
            self.first, self.first_at = signum, time.monotonic()
        with contextlib.suppress(OSError):  # the pipe is full: it is readable already
            os.write(self._wake_write, b"\0")

    @property
    def hurried(self) -> bool:
        """True once a second signal has come."""
        return self.count > 1

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            # started under nohup, the hangup is ignored on purpose: it stays ignored
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue
            signal.signal(signum, self)


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
        self.subreaper = _become_subreaper()
        _keep_inherited_fds()
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
        moves there first). posix_spawn rather than subprocess: it is markedly
        cheaper per block, and the files are opened by the child itself.
        FileNotFoundError when argv[0] is not on the block's PATH (the guide's env may set its own).
        """
        full_env = dict(env)
        full_env[RUN_MARKER] = self.run_token
        full_env[BLOCK_MARKER] = block_tag
        search_path = full_env.get("PATH", os.defpath)
        if search_path == os.environ.get("PATH", os.defpath):
            spawn, program = os.posix_spawnp, argv[0]  # searches the harness's PATH, in C
        else:
            spawn, program = os.posix_spawn, shutil.which(argv[0], path=search_path) or ""
            if not program:
                raise FileNotFoundError(f"{argv[0]} not found on PATH")
        write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        pid = spawn(
            program,
            list(argv),
            full_env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, str(stdout_path), write, 0o644),
                (os.POSIX_SPAWN_OPEN, 2, str(stderr_path), write, 0o644),
            ],
            setsid=True,  # its own session and process group, so the whole tree can be ended
            # Python ignores these for itself; a block gets them back as a shell would have them,
            # or `yes | head -1` fails with "Broken pipe" instead of ending quietly
            setsigdef=_RESTORED_SIGNALS,
        )
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
            ready, _, _ = select.select([pidfd, self.signals.wake_fd], [], [], seconds)
            return pidfd in ready
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
        import psutil

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

    def _members(self, block_tag: str | None, roots: Iterable[int] = ()) -> list[psutil.Process]:
        """Processes of this run (or of one block): by marker, process group, or descent."""
        import psutil

        found: dict[int, psutil.Process] = {}
        me = os.getpid()
        for root_pid in roots:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(root_pid)
                for proc in [root, *root.children(recursive=True)]:
                    found[proc.pid] = proc
                with contextlib.suppress(OSError):
                    group = os.getpgid(root_pid)
                    if group == os.getpgid(0):  # never the harness's own group (the CI job's)
                        continue
                    for proc in psutil.process_iter():
                        with contextlib.suppress(psutil.Error, OSError):
                            if os.getpgid(proc.pid) == group:
                                found[proc.pid] = proc
        for pid in self._marked_pids(block_tag):
            if pid not in found:
                with contextlib.suppress(psutil.Error):
                    found[pid] = psutil.Process(pid)
        found.pop(me, None)
        return list(found.values())

    def _marked_pids(self, block_tag: str | None) -> list[int]:
        """Pids whose environment carries this run's marker (and this block's, if given).

        Reads /proc directly: cheaper than psutil for the common case of
        finding nothing, and it sees daemons that left their process group.
        """
        wanted = [f"{RUN_MARKER}={self.run_token}".encode()]
        if block_tag is not None:
            wanted.append(f"{BLOCK_MARKER}={block_tag}".encode())
        me = os.getpid()
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    variables = handle.read().split(b"\0")
            except OSError:  # gone, or not ours to read
                continue
            if all(item in variables for item in wanted):
                pids.append(int(entry))
        return pids

    def dump_stacks(self, block: BlockProcess, dump_dir: Path) -> tuple[list[str], list[str]]:
        """py-spy dumps of every Python process in the block's tree; (paths, one-line notes).

        Skipped, or cut short, when a stop signal comes: the run must end within 2 s of it.
        """
        import psutil

        paths: list[str] = []
        notes: list[str] = []
        members = self._members(block.block_tag, [block.pid])
        pythons = []
        for proc in members:
            with contextlib.suppress(psutil.Error):
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                name = proc.name().lower()
                cmdline = " ".join(proc.cmdline()[:1]).lower()
                if "python" in name or "python" in os.path.basename(cmdline):
                    pythons.append(proc)
        if not pythons:
            return paths, notes
        py_spy = _find_py_spy()
        if py_spy is None:
            notes.append("stack dump skipped: py-spy is not installed (pip install py-spy)")
            return paths, notes
        dump_dir.mkdir(parents=True, exist_ok=True)
        budget_end = time.monotonic() + _DUMP_BUDGET_S
        for proc in pythons:
            signum = self.stop_requested()
            if signum is not None:
                notes.append(f"stack dump of pid {proc.pid} skipped: the run was interrupted by signal {signum}")
                continue
            left_s = budget_end - time.monotonic()
            if left_s <= 1:
                notes.append(f"stack dump of pid {proc.pid} skipped: dump time budget used up")
                continue
            text, note = _py_spy_dump(py_spy, proc.pid, min(_DUMP_TIMEOUT_S, left_s), self.stop_requested)
            if text is None:
                notes.append(f"stack dump of pid {proc.pid} failed: {note}")
                continue
            path = dump_dir / f"pid-{proc.pid}.txt"
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        return paths, notes

    def stack_dump_problem(self) -> str | None:
        """Why stack dumps on timeout would be missing in this run (what is wrong, then the fix), or None.

        Runs at the start of every run, so it must be cheap. The kernel's own
        rules are read from /proc (0.15 ms, measured): Yama's ptrace_scope,
        and whether the harness (or py-spy itself) holds CAP_SYS_PTRACE; they
        decide the common cases, a container without --cap-add SYS_PTRACE on
        a host with ptrace_scope 1 or more among them. What /proc cannot tell
        is whether a seccomp filter refuses ptrace where those rules allow it
        (Docker's default profile does on kernels before 4.8; custom profiles
        may): only under a filter is a trial `py-spy dump` of the harness
        itself taken. It costs about 20 ms (measured on 2 cores), over a
        tenth of a short run's fixed cost, which the overhead benchmark's
        target could not absorb on every run; inside a container, where a
        filter is the rule, a night's run takes hours.
        """
        py_spy = _find_py_spy()
        if py_spy is None:
            return "py-spy is not installed. Fix: install it beside the harness (pip install py-spy)"
        if not (os.path.isfile(py_spy) and os.access(py_spy, os.X_OK)):
            return f"{PY_SPY_ENV} names {py_spy}, which is not an executable file. Fix: point it at py-spy, or unset it"
        status = _proc_status()
        try:
            file_caps: bytes | None = os.getxattr(py_spy, "security.capability")
        except OSError:  # none set (the usual case), or no extended attributes here
            file_caps = None
        refusal = ptrace_refusal(
            _read_int("/proc/sys/kernel/yama/ptrace_scope"),
            int(status.get("CapEff", "0"), 16),
            int(status.get("CapBnd", "0"), 16),
            file_caps,
        )
        if refusal is not None or status.get("Seccomp", "0") != "2":
            return refusal
        return self._trial_dump(py_spy)

    def _trial_dump(self, py_spy: str) -> str | None:
        """Dump the harness's own stack as a block's would be; why that was refused, or None."""
        done = _run_bounded([py_spy, "dump", "--pid", str(os.getpid())], _TRIAL_DUMP_TIMEOUT_S, self.stop_requested)
        if isinstance(done, str):
            if self.stop_requested() is not None:
                return None  # the run stops anyway; nothing to warn about
            return f"a trial py-spy dump {done}. Fix: check that `py-spy dump --pid PID` works here"
        said = _py_spy_said(done.stderr or done.stdout)
        if done.returncode != 0 and _PERMISSION_WORDS.search((done.stderr or done.stdout).decode("utf-8", "replace")):
            return f"py-spy may not attach to processes here (a trial dump said: {said}). Fix: {_FIX_CAPABILITY}"
        # Any other failure (a Python version this py-spy does not know, say) is about the
        # harness's interpreter, not the blocks' processes: no warning.
        return None

    def end_tree(self, block: BlockProcess, *, grace_s: float | None = None) -> list[TrackedProcess]:
        """End a block's whole tree: SIGTERM, a grace period, SIGKILL; then check nothing is left.

        Returns the processes ended, the block's own first. After a stop
        signal the grace period ends a second after it; after a second
        signal the tree gets SIGKILL at once.
        """
        members = self._members(block.block_tag, [block.pid])
        described = _describe(members)  # before the signal, while they can still say what they are
        hurried = self.signals.hurried
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(block.pid, signal.SIGKILL if hurried else signal.SIGTERM)
        grace = self.grace_s if grace_s is None else grace_s
        ended, exit_codes = self._terminate(
            members, grace, origin=block.block_name, described=described, hurried=hurried
        )
        # a last look: whatever the tree forked during the grace period goes too
        known = {proc.pid for proc in members}
        stragglers = [p for p in self._members(block.block_tag, [block.pid]) if p.pid not in known and _alive(p)]
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
        import psutil

        described = _describe(members) if described is None else described
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
        alive = _wait_gone(members, lambda: self._ends_by(grace_end), exit_codes)
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.add(proc.pid)
        if alive:
            kill_end = self._kill_wait_ends_by()
            _wait_gone(alive, lambda: kill_end, exit_codes)
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
        if not self._marked_pids(None) and not _has_children():  # the usual case: no psutil to import
            return []
        import psutil

        # Besides the marker: every descendant of the harness. Orphaned daemons are re-parented
        # to it (it is a subreaper), and this holds even if a process dropped or lost its environment.
        descendants = [child.pid for child in psutil.Process().children(recursive=True)]
        members = [p for p in self._members(None, descendants) if _alive(p)]
        ended, _ = self._terminate(members, self.grace_s if grace_s is None else grace_s)
        self.reap_orphans()
        return ended


def _wait_gone(
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
                if _alive(proc):
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


def _describe(members: Iterable[psutil.Process]) -> dict[int, str]:
    """pid -> command line (or name) of each process that can still say."""
    import psutil

    described = {}
    for proc in members:
        with contextlib.suppress(psutil.Error):
            described[proc.pid] = " ".join(proc.cmdline()) or proc.name()
    return described


def _has_children() -> bool:
    """Whether the harness has any child process (cheaply, from /proc; True when unsure)."""
    try:
        tasks = os.listdir("/proc/self/task")
        return any(Path(f"/proc/self/task/{tid}/children").read_text().strip() for tid in tasks)
    except OSError:
        return True


def _alive(proc: psutil.Process) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _find_py_spy() -> str | None:
    chosen = os.environ.get(PY_SPY_ENV)
    if chosen:
        return chosen
    beside = Path(sys.executable).parent / "py-spy"
    if beside.exists():
        return str(beside)
    return shutil.which("py-spy")


def _run_bounded(
    argv: Sequence[str], timeout_s: float, stop_requested: Callable[[], int | None]
) -> subprocess.CompletedProcess[bytes] | str:
    """Run a short helper command (py-spy), its output captured; what it did, or why it was cut short.

    It is killed at the time limit, and as soon as a stop signal comes: a hung
    py-spy must not hold the run past the 2 s a stop may take.
    """
    try:
        child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return str(exc)
    end = time.monotonic() + timeout_s
    with child:
        while True:
            signum = stop_requested()
            if signum is not None:
                why = f"was cut short: the run was interrupted by signal {signum}"
                break
            left_s = end - time.monotonic()
            if left_s <= 0:
                why = f"did not answer in {timeout_s:.0f}s"
                break
            try:
                out, err = child.communicate(timeout=min(left_s, _OUTPUT_POLL_S))
            except subprocess.TimeoutExpired:
                continue  # communicate() keeps what was read so far for the next call
            return subprocess.CompletedProcess(list(argv), child.returncode, out, err)
        child.kill()
        child.communicate()
    return why


def _py_spy_said(output: bytes) -> str:
    """py-spy's error in one line: its first line, and the innermost cause when it lists them."""
    # RUST_BACKTRACE=1 (set on some machines) appends a backtrace of py-spy itself: of no use to a reader
    text = output.decode("utf-8", "replace").split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if "Caused by:" in lines and lines[-1] != "Caused by:":
        return f"{lines[0]} ({re.sub(r'^[0-9]+: ', '', lines[-1])})"
    return lines[0]


def _py_spy_dump(
    py_spy: str, pid: int, timeout_s: float, stop_requested: Callable[[], int | None]
) -> tuple[str | None, str]:
    """Run `py-spy dump`, with --native first; return (text, why it failed)."""
    last_error = ""
    for extra in (["--native"], []):
        done = _run_bounded([py_spy, "dump", "--pid", str(pid), *extra], timeout_s, stop_requested)
        if isinstance(done, str):
            return None, f"py-spy {done}"
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.decode("utf-8", "replace"), ""
        last_error = _py_spy_said(done.stderr or done.stdout) or f"exit {done.returncode}"
    return None, last_error


def _proc_status() -> dict[str, str]:
    """The fields of /proc/self/status (CapEff, CapBnd, Seccomp, ...); empty where there is no /proc."""
    fields = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
    except OSError:
        pass
    return fields


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def ptrace_refusal(ptrace_scope: int | None, cap_eff: int, cap_bnd: int, py_spy_file_caps: bytes | None) -> str | None:
    """Why the kernel's rules keep py-spy, started by the harness, from attaching to a block's processes.

    `ptrace_scope` is Yama's setting (None without Yama: then the classic
    rule, same user, applies, which blocks started by the harness meet);
    `cap_eff` and `cap_bnd` the harness's effective and bounding capability
    masks; `py_spy_file_caps` py-spy's `security.capability` attribute, if
    set. py-spy is the blocks' sibling, never their ancestor, so with
    ptrace_scope 1 or 2 only CAP_SYS_PTRACE lets it attach; with 3 nothing does.
    None when the rules allow it.
    """
    if ptrace_scope == 3:
        return (
            "kernel.yama.ptrace_scope is 3 on this host: no process may attach to another."
            " Fix: the host must boot with kernel.yama.ptrace_scope at 1 or lower, and the container get --cap-add SYS_PTRACE"
        )
    if ptrace_scope not in (1, 2) or cap_eff >> _CAP_SYS_PTRACE & 1:
        return None
    if py_spy_file_caps is not None and len(py_spy_file_caps) >= 8:
        # struct vfs_cap_data: magic_etc, then the low 32 bits of the permitted set (little-endian)
        magic_etc, permitted = struct.unpack_from("<II", py_spy_file_caps)
        raised_at_exec = magic_etc & _VFS_CAP_FLAGS_EFFECTIVE and permitted >> _CAP_SYS_PTRACE & 1
        if raised_at_exec and cap_bnd >> _CAP_SYS_PTRACE & 1:
            return None
    return (
        f"the harness lacks CAP_SYS_PTRACE and kernel.yama.ptrace_scope is {ptrace_scope},"
        f" so py-spy may not attach to a block's processes. Fix: {_FIX_CAPABILITY}"
    )
