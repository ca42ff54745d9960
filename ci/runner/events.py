"""The run's events for the live console: a block started, a block finished, in order."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ci.base.text import error_line
from ci.guide.model import Step
from ci.record.outcome import Attempt, BlockResult

__all__ = ["Events", "Listener"]


class Listener(Protocol):
    """Receives the run's events as they happen (the live console)."""

    def block_started(self, step: Step, total: int, stdout_path: Path, stderr_path: Path) -> None: ...

    def block_retrying(self, step: Step, attempt: Attempt, delay_s: float) -> None: ...

    def block_ending(self, step: Step, why: str) -> None: ...

    def block_finished(self, result: BlockResult, total: int) -> None: ...


class Events:
    """Tells the listener about blocks in order, holding a finished block's report until the next block runs.

    Reporting a block (reading its output again to show it) is a good part of
    the harness's own time per block; written while the next block runs, it
    no longer delays that block's start. The listener sees the same events in
    the same order: the next block's start is announced right after its
    spawn, once the previous report is out.

    A listener that raises (a bug in the harness's reporting) costs that
    event's lines in the log, not the run: the traceback goes to stderr (in
    full the first time), the blocks run on, and every report is written.
    """

    def __init__(self, listener: Listener, total: int) -> None:
        self.listener = listener
        self.total = total
        self.pending: BlockResult | None = None  # finished, not reported yet
        self.announced: Step | None = None  # the last block whose start was announced
        self.failures = 0  # events the listener raised on

    def started(self, step: Step, stdout_path: Path, stderr_path: Path) -> None:
        """Announce a block's start once (after its spawn, or when it could not be started)."""
        if self.announced is step:
            return
        self.flush()
        self.announced = step
        self._tell(
            f"the start of block {step.name}", self.listener.block_started, step, self.total, stdout_path, stderr_path
        )

    def retrying(self, step: Step, attempt: Attempt, delay_s: float) -> None:
        """Say that an attempt of the running block failed and another follows after DELAY_S."""
        self.flush()
        self._tell(f"the retry of block {step.name}", self.listener.block_retrying, step, attempt, delay_s)

    def ending(self, step: Step, why: str) -> None:
        """Say that the running block is being ended (its stacks dumped, its tree signalled) and WHY."""
        self._tell(f"the end of block {step.name}", self.listener.block_ending, step, why)

    def finished(self, result: BlockResult) -> None:
        self.flush()
        self.pending = result

    def flush(self) -> None:
        if self.pending is not None:
            result, self.pending = self.pending, None
            self._tell(f"the verdict of block {result.step.name}", self.listener.block_finished, result, self.total)

    def _tell(self, what: str, call: Callable[..., None], *args: object) -> None:
        try:
            call(*args)
        except Exception as exc:  # a bug: said on stderr, which is not the console that may be the broken part
            self.failures += 1
            if self.failures == 1:
                said = f"; the run goes on and writes every report:\n{traceback.format_exc()}"
            else:
                said = f" again: {type(exc).__name__}: {exc}"
            print(
                error_line(f"guide-guard could not show {what} in the log (a bug: please report it){said}"),
                file=sys.stderr,
                flush=True,
            )
