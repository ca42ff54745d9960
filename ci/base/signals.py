"""The run's stop requests: every signal whose default would end the harness, counted, waking a waiting run at
once; threads that leave every signal to the main thread; the pid file that says whom to signal."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from ci.base.files import write_atomically

__all__ = [
    "ALWAYS_STOP",
    "PID_FILE",
    "STOP_SIGNALS",
    "SUSPEND_SIGNALS",
    "StopSignals",
    "exit_words",
    "remove_pid_file",
    "signal_name",
    "start_deaf",
    "write_pid_file",
]


def _numbers(*names: str) -> tuple[int, ...]:
    """The numbers of the signals this system has among NAMES, each once (SIGPOLL is SIGIO on Linux)."""
    return tuple(dict.fromkeys(int(getattr(signal, name)) for name in names if hasattr(signal, name)))


def _real_time() -> tuple[int, ...]:
    low, high = getattr(signal, "SIGRTMIN", None), getattr(signal, "SIGRTMAX", None)
    return tuple(range(int(low), int(high) + 1)) if low is not None and high is not None else ()


# Every signal whose default action ends the process and that a process can be sent to be stopped with
# (by kill, a terminal, a CI runner, a timer, a resource limit). Left at their defaults: SIGKILL and
# SIGSTOP (they cannot be caught); SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP and SIGABRT (the
# harness's own fault: a handler that returned would fault again); SIGPIPE and SIGXFSZ, which Python
# ignores so that the write fails instead (a console whose reader left, a file over its size limit).
_FATAL_BY_DEFAULT = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM")
_FATAL_BY_DEFAULT_TOO = ("SIGPROF", "SIGXCPU", "SIGPWR", "SIGSTKFLT", "SIGIO", "SIGPOLL")
STOP_SIGNALS = _numbers(*_FATAL_BY_DEFAULT, *_FATAL_BY_DEFAULT_TOO) + _real_time()
# Handled even when the harness started with them ignored: a shell without job control starts a background
# job with SIGINT and SIGQUIT ignored, and a CI runner stops a step with SIGINT or SIGTERM. Any other stop
# signal ignored at the start (nohup's SIGHUP, `trap '' USR1`) stays ignored, as it was asked to be.
ALWAYS_STOP = _numbers("SIGINT", "SIGTERM", "SIGQUIT")
# Their default stops the process: a harness stopped mid-run lets its blocks' time limits lapse and its
# servers run on. Ignored while a run lasts (a block gets them back at their defaults).
SUSPEND_SIGNALS = _numbers("SIGTSTP", "SIGTTIN", "SIGTTOU")


def signal_name(signum: int) -> str:
    """SIGTERM, SIGRTMIN+3: the name a shell's `kill -l` gives, or `signal N`."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        low = getattr(signal, "SIGRTMIN", None)
        return f"SIGRTMIN+{signum - int(low)}" if low is not None and signum > int(low) else f"signal {signum}"


def exit_words(code: int | None) -> str:
    """How a process ended, from its exit code (negative: killed by that signal): `exit 1`, `killed by SIGKILL`."""
    return f"killed by {signal_name(-code)}" if code is not None and code < 0 else f"exit {code}"


class StopSignals:
    """The run's stop requests: any of STOP_SIGNALS (SIGINT, SIGTERM, a closed terminal's SIGHUP...), counted.

    The first asks the run to stop: the running block is ended, every grace
    period is cut to about a second, and the reports are written. A second
    one asks it to hurry: what is left gets SIGKILL at once. The handler only
    records, so that a signal never cuts a report in half. The kernel's own
    handler writes a byte to a pipe (signal.set_wakeup_fd) as the signal
    comes, whatever the main thread is doing, so that a wait in poll() wakes
    at once: a wait for the block, or a console write waiting for a reader.
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

    def pause(self, seconds: float) -> int | None:
        """Sleep SECONDS, or less: the first stop signal's number, at once, when one comes (or came before)."""
        end = time.monotonic() + seconds
        watch = select.poll()
        watch.register(self.wake_fd, select.POLLIN)
        while self.first is None and (remaining_s := end - time.monotonic()) > 0:
            watch.poll(remaining_s * 1000)  # the wake-up pipe turns readable as a signal comes, and stays so
        return self.first

    @property
    def hurried(self) -> bool:
        """True once a second signal has come."""
        return self.count > 1

    def install(self) -> None:
        """Take every stop signal (see STOP_SIGNALS, ALWAYS_STOP) and ignore the suspending ones."""
        for signum in STOP_SIGNALS:
            if signum not in ALWAYS_STOP and signal.getsignal(signum) == signal.SIG_IGN:
                continue  # started under nohup, the hangup is ignored on purpose: it stays ignored
            signal.signal(signum, self)
        for signum in SUSPEND_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        # written by the C-level handler, even while the main thread waits for a lock a console write holds
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)


def start_deaf(thread: threading.Thread) -> None:
    """Start THREAD with every signal blocked in it, so that the kernel hands a signal sent to the process to
    the main thread.

    A signal sent to the process goes to any one of its threads that does not block it. Python runs its
    handlers in the main thread alone, and only once that thread runs again: a main thread blocked in a
    wait that the signal did not interrupt (a guide's fetch, which waits on its reading thread) would sleep
    through Ctrl-C until the wait ends by itself. The new thread inherits the mask it is started under
    (a fault of its own, SIGSEGV say, is still delivered: the kernel does not let such a signal be blocked).
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        thread.start()
    finally:  # a signal that came meanwhile is pending, and is handled as this returns
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


PID_FILE = "harness.pid"  # in the output directory while the run lasts


def write_pid_file(output_dir: Path) -> Path:
    """Write the harness's pid to OUTPUT_DIR/harness.pid, whole or not at all (a reader may look at any time)."""
    path = output_dir / PID_FILE
    write_atomically(path, f"{os.getpid()}\n", encoding="ascii")
    return path


def remove_pid_file(path: Path) -> None:
    """Remove the pid file, unless another run has written its own there since."""
    try:
        if path.read_text(encoding="ascii").strip() == str(os.getpid()):
            path.unlink()
    except OSError:
        pass
