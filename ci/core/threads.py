"""Threads of the harness that leave every signal to the main thread, where Python handles them."""

from __future__ import annotations

import signal
import threading

__all__ = ["start_deaf"]


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
