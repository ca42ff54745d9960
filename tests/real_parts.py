"""What the rehearsal's real parts need from outside the repository, for the tests that run them (-m real_parts)."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from pathlib import Path

from outside import unavailable

__all__ = ["require_real_parts"]

HOW = (
    "Fetch the wheels the guide installs with `python -m ci.rehearsal.parts fetch DIR` and set "
    "GUIDE_GUARD_WHEELHOUSE=DIR; install uv (`pip install -e '.[real]'`) and Debian's libibverbs1, as .ci/run does."
)


def require_real_parts() -> Path:
    """The wheelhouse, once the real uv and the Mooncake wheel's system library are here too; else skip (or fail)."""
    configured = os.environ.get("GUIDE_GUARD_WHEELHOUSE", "")
    if not configured or not Path(configured).is_dir():
        unavailable(f"no wheelhouse (GUIDE_GUARD_WHEELHOUSE={configured!r})", HOW)
    if not (Path(sys.executable).parent / "uv").is_file() and shutil.which("uv") is None:
        unavailable("the real uv is not installed", HOW)
    try:
        ctypes.CDLL("libibverbs.so.1")
    except OSError:
        unavailable("libibverbs.so.1 cannot be loaded", HOW)
    return Path(configured)
