"""The guide's ci.cleanup: bash commands run once its run has ended, whatever its verdict, even after a stop signal.

They run after the guide's processes are ended and its files collected
(teardown, collect, cleanup), each supervised as a diagnostic is
(ci.runner.diagnostics.run_supervised). Their verdict is not the guide's: a
cleanup that fails is said, and the blocks' outcome stands.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.process.supervisor import ProcessSupervisor
from ci.record.outcome import DiagnosticResult
from ci.runner.diagnostics import command_limit_s, run_supervised
from ci.runner.outputs import slug

__all__ = ["CLEANUP_AFTER_SIGNAL_S", "CLEANUP_LEAST_S", "DEFAULT_CLEANUP_TIMEOUT_S", "run_cleanup"]

DEFAULT_CLEANUP_TIMEOUT_S = 60.0  # each ci.cleanup command's limit unless ci.cleanup_timeout says
# after a stop signal the reports are due within 2 s of it: the cleanups end by 1.5 s after the signal, but get at
# least a quarter of a second from when they first see it (a teardown or a collection may have used the rest)
CLEANUP_AFTER_SIGNAL_S = 1.5
CLEANUP_LEAST_S = 0.25
_NOT_RUN = "not run: the run was stopping and the cleanups' time after the stop signal was used up"


def run_cleanup(
    commands: Sequence[str],
    *,
    limit_s: float | None,
    output_dir: Path,
    file_prefix: str,
    deadline: float | None,
    env: Mapping[str, str],
    supervisor: ProcessSupervisor,
) -> tuple[DiagnosticResult, ...]:
    """Run each cleanup command in turn, in the working directory with the blocks' environment; what became of each.

    Each has its own limit (`limit_s`, else 60 s; with --deadline, as a
    diagnostic near it) and its output in OUTPUT_DIR/blocks/[PREFIX]cleanup/K-COMMAND.txt.
    A stop signal, before or during them, ends none at once: they share the
    time to CLEANUP_AFTER_SIGNAL_S after it (at least CLEANUP_LEAST_S), then
    the one running is ended and the rest are not started (each said so).
    """
    stop = _StopWindow(supervisor)
    own_limit_s = limit_s or DEFAULT_CLEANUP_TIMEOUT_S
    done: list[DiagnosticResult] = []
    for index, command in enumerate(commands, start=1):
        if stop.ends_by(float("inf")) <= time.monotonic():
            done.append(DiagnosticResult(command, None, 0, False, None, False, 0.0, _NOT_RUN))
            continue
        # under blocks/, as a diagnostic's: the run's own files there are masked (--mask-files) and kept apart
        output_path = output_dir / "blocks" / f"{file_prefix}cleanup" / f"{index}-{slug(command)[:40]}.txt"
        result, _ = run_supervised(
            command,
            (output_path, output_dir),
            f"cleanup {index}",
            f"{file_prefix}cleanup-{index}",
            command_limit_s(own_limit_s, deadline),
            env,
            supervisor,
            ends_by=stop.ends_by,
        )
        done.append(result)
    return tuple(done)


class _StopWindow:
    """When the cleanups must end, once a stop signal has come: its end, asked again as they run."""

    def __init__(self, supervisor: ProcessSupervisor) -> None:
        self.supervisor = supervisor
        self.end: float | None = None  # set the first time a stop is seen

    def ends_by(self, own_end: float) -> float:
        """OWN_END (a command's own limit, monotonic), or sooner when the run is stopping."""
        if self.end is None and self.supervisor.stop_requested() is not None:
            signalled = self.supervisor.signals.first_at or time.monotonic()
            self.end = max(signalled + CLEANUP_AFTER_SIGNAL_S, time.monotonic() + CLEANUP_LEAST_S)
        return own_end if self.end is None else min(own_end, self.end)
