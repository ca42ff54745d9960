"""The run's pid file in its output directory, while the run lasts: whom to signal to stop it."""

from __future__ import annotations

import os
from pathlib import Path

from ci.core.files import write_atomically

__all__ = ["PID_FILE", "remove_pid_file", "write_pid_file"]

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
