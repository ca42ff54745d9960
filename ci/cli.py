"""What every command of the harness shares: the name it was started by, and `--version`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ci import __version__

__all__ = ["CONSOLE_SCRIPT_PREFIX", "command_parser", "program_name"]

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
