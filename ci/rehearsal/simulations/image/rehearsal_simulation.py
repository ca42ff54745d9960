"""Shared by every simulation of the rehearsal: say it is one, record its calls, register long-lived processes."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TextIO

PREFIX = "[simulation]"
SANDBOX_ENV = "REHEARSAL_SANDBOX"  # the rehearsal's sandbox directory
BREAK_ENV = "REHEARSAL_BREAK"  # the failure knob in effect, if any
BLOCK_ENV = "GUIDE_GUARD_BLOCK"  # set by the harness in every block's environment


def say(text: str, stream: TextIO | None = None) -> None:
    """One line that starts with [simulation] (stderr unless told)."""
    print(f"{PREFIX} {text}", file=stream or sys.stderr, flush=True)


def broken(knob: str) -> bool:
    """True when the rehearsal runs with this failure knob."""
    return os.environ.get(BREAK_ENV, "") == knob


def _append(name: str, line: str) -> None:
    sandbox = os.environ.get(SANDBOX_ENV)
    if not sandbox:
        return
    # one short O_APPEND write per line: concurrent writers do not interleave
    with open(os.path.join(sandbox, name), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def record(tool: str, argv: list[str] | None = None, *, real: bool = False) -> None:
    """Append this call (tool, argv, cwd, the block that made it, real or simulated) to the sandbox's calls.jsonl."""
    entry = {
        "tool": tool,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "time": round(time.time(), 3),
        "block": os.environ.get(BLOCK_ENV),  # the harness's marker of the block whose process tree this is
        "real": real,
    }
    _append("calls.jsonl", json.dumps(entry))


def register_process(tool: str) -> None:
    """Note a long-lived simulated process, so the rehearsal can prove none outlives the run."""
    try:
        with open(f"/proc/{os.getpid()}/stat", encoding="utf-8") as handle:
            start_ticks = handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        start_ticks = "?"
    _append("processes.txt", f"{os.getpid()} {start_ticks} {tool}")
