"""The run's events for the live console: a block started, a block finished, in order."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ci.core.model import BlockResult, Step

__all__ = ["Events", "Listener"]


class Listener(Protocol):
    """Receives the run's events as they happen (the live console)."""

    def block_started(self, step: Step, total: int, stdout_path: Path, stderr_path: Path) -> None: ...

    def block_finished(self, result: BlockResult, total: int) -> None: ...


class Events:
    """Tells the listener about blocks in order, holding a finished block's report until the next block runs.

    Reporting a block (reading its output again to show it) is a good part of
    the harness's own time per block; written while the next block runs, it
    no longer delays that block's start. The listener sees the same events in
    the same order: the next block's start is announced right after its
    spawn, once the previous report is out.
    """

    def __init__(self, listener: Listener, total: int) -> None:
        self.listener = listener
        self.total = total
        self.pending: BlockResult | None = None  # finished, not reported yet
        self.announced: Step | None = None  # the last block whose start was announced

    def started(self, step: Step, stdout_path: Path, stderr_path: Path) -> None:
        """Announce a block's start once (after its spawn, or when it could not be started)."""
        if self.announced is step:
            return
        self.flush()
        self.announced = step
        self.listener.block_started(step, self.total, stdout_path, stderr_path)

    def finished(self, result: BlockResult) -> None:
        self.flush()
        self.pending = result

    def flush(self) -> None:
        if self.pending is not None:
            result, self.pending = self.pending, None
            self.listener.block_finished(result, self.total)
