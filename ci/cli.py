"""What every command of the harness shares: the name it was started by, `--version`, exit codes, `[ERROR]` lines."""

from __future__ import annotations

import argparse
import enum
import os
import sys
from typing import Any, TextIO

from ci import __version__

__all__ = ["CONSOLE_SCRIPT_PREFIX", "ExitCode", "command_parser", "fail", "print_error", "program_name"]

# The installed console scripts: guide-guard, guide-guard-rehearse, guide-guard-monitor, guide-guard-drift.
CONSOLE_SCRIPT_PREFIX = "guide-guard"


def program_name(module: str) -> str:
    """The command as the user typed it: the console script's name, else `python -m MODULE`.

    Under `python -m`, argv[0] is the module's file path, which no user typed; any other program
    name (a test runner calling main() in its own process) is not ours to show either.
    """
    started_as = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if started_as.startswith(CONSOLE_SCRIPT_PREFIX) and not started_as.endswith(".py"):
        return started_as
    return f"python -m {module}"


def command_parser(module: str, **options: Any) -> argparse.ArgumentParser:
    """An ArgumentParser for MODULE's command line, named as it was started, with `--version`."""
    parser = argparse.ArgumentParser(prog=program_name(module), **options)
    parser.add_argument(
        "--version", action="version", version=f"guide-guard {__version__}", help="print the version and exit"
    )
    return parser


class ExitCode(enum.IntEnum):
    """The exit statuses every command shares (a signal ends a run with 128 + its number instead)."""

    OK = 0  # everything asked for was done and passed
    FAILED = 1  # it ran, and something it checked did not hold (a block, a drift finding, an update left undone)
    USAGE = 2  # a usage or document error: nothing was run

    @staticmethod
    def interrupted(signum: int) -> int:
        """The status of a run stopped by a signal, as a shell reports it: 130 SIGINT, 143 SIGTERM, 129 SIGHUP."""
        return 128 + signum


def print_error(message: str, stream: TextIO | None = None) -> None:
    """The one way a command says what went wrong: an `[ERROR]` line, flushed at once.

    On stderr, unless STREAM is given: a line that belongs with a report on stdout (the run's console) goes there.
    """
    print(f"[ERROR] {message}", file=sys.stderr if stream is None else stream, flush=True)


def fail(message: str, parser: argparse.ArgumentParser | None = None) -> ExitCode:
    """Fail a command on a usage or input error: its usage line (when given), the `[ERROR]` line, exit 2."""
    if parser is not None:
        parser.print_usage(sys.stderr)
    print_error(message)
    return ExitCode.USAGE
