"""The run's stop requests: SIGINT, SIGTERM and SIGHUP, counted, waking a waiting run at once."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from types import FrameType

__all__ = ["StopSignals"]


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
