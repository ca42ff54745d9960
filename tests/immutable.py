"""A file or directory nothing may change, even as root (`chattr +i`): what a read-only one is to its user."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["immutable"]


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """PATH made immutable while it lasts; the test is skipped where chattr is missing or the file system refuses."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i does not work here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
