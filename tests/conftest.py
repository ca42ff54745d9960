"""Shared fixtures: run the command line on a guide written to a temporary directory."""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from web_stub import WebStub, running_stub

REPO = Path(__file__).resolve().parents[1]

# The suite runs as outside GitHub Actions, whoever runs it. As a step of a CI job it would inherit the job's
# own files and variables: every harness a test starts with GITHUB_ACTIONS=true would append its summary and
# fake verdicts to the job's $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT, and GITHUB_ACTIONS=true would change
# what the tests that do not set it see. They are taken out of os.environ itself, before any test runs, so
# that every process a test starts (by base_env() or from os.environ) is clean; a test that wants one sets it.
RUNNER_VARIABLE_PREFIXES = ("GITHUB_", "RUNNER_")
for _name in [name for name in os.environ if name.startswith(RUNNER_VARIABLE_PREFIXES)]:
    del os.environ[_name]

# Hundreds of harnesses start during the suite; where PYTHONDONTWRITEBYTECODE is set (as on our CI
# machines) each would compile ci/ again. Compile it once up front.
# Not the rehearsal's simulations (ci/rehearsal/simulations/: data copied into a sandbox).
compileall.compile_dir(str(REPO / "ci"), quiet=1, rx=re.compile(r"/ci/rehearsal/simulations/"))
TEST_MARKER = "GUIDE_GUARD_TEST_ID"  # set in the harness's environment; every block inherits it
# The log's colour follows these (NO_COLOR, FORCE_COLOR, TERM=dumb): a test's expectations must not depend on the caller's.
COLOUR_VARIABLES = ("NO_COLOR", "FORCE_COLOR", "TERM")


def base_env() -> dict[str, str]:
    """The test process's environment, without what would colour the harness's log."""
    return {name: value for name, value in os.environ.items() if name not in COLOUR_VARIABLES}


@dataclass
class Run:
    """A finished `python -m ci.run` and what it left on disk."""

    returncode: int
    stdout: str
    stderr: str
    output_dir: Path
    guide: Path

    @property
    def record(self) -> dict[str, Any]:
        return json.loads((self.output_dir / "results.json").read_text(encoding="utf-8"))

    @property
    def blocks(self) -> list[dict[str, Any]]:
        return self.record["blocks"]

    def block(self, name: str) -> dict[str, Any]:
        for block in self.blocks:
            if name in (block["id"], block["store"], str(block["ordinal"])):
                return block
        raise AssertionError(f"no block {name!r} in results.json: {[b['id'] or b['store'] for b in self.blocks]}")

    def statuses(self) -> dict[str, str]:
        return {b["id"] or b["store"] or str(b["ordinal"]): b["status"] for b in self.blocks}


def _survivors(test_id: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(TEST_MARKER) == test_id and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture
def test_id() -> Iterator[str]:
    """A marker in the environment of every process a test starts; none may survive the test."""
    ident = uuid.uuid4().hex
    yield ident
    deadline = time.monotonic() + 5
    survivors = _survivors(ident)
    while survivors and time.monotonic() < deadline:
        time.sleep(0.2)
        survivors = _survivors(ident)
    for proc in survivors:  # clean up, then fail: a leak must not spill into other tests
        with contextlib.suppress(psutil.Error):
            proc.kill()
    assert not survivors, "processes survived the test: " + "; ".join(
        f"{p.pid} {' '.join(p.cmdline())}" for p in survivors if p.is_running()
    )


@pytest.fixture
def harness_env(test_id: str) -> dict[str, str]:
    """The environment for a harness started by hand (Popen) in a test."""
    return {**base_env(), TEST_MARKER: test_id}


@pytest.fixture
def run_harness(tmp_path: Path, harness_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `python -m MODULE ARGS...` to its end as a user would, its output captured, in the test's tmp_path."""

    def run(
        *args: str,
        module: str = "ci.run",
        cwd: Path | None = None,
        env: dict[str, str] | None = None,  # merged over harness_env, which carries the test's marker
        timeout_s: float = 60,
        stdin: int | None = subprocess.DEVNULL,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=tmp_path if cwd is None else cwd,
            env={**harness_env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=stdin,
        )

    return run


@pytest.fixture
def guide_runner(tmp_path: Path, run_harness: Callable[..., subprocess.CompletedProcess[str]]):  # type: ignore[no-untyped-def]
    """Write a guide (dedented) and run `python -m ci.run` on it as a user would."""

    def run(
        text: str, *args: str, env: dict[str, str] | None = None, timeout_s: float = 120, name: str = "guide.md"
    ) -> Run:
        guide = tmp_path / name
        guide.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        output_dir = tmp_path / "out"
        done = run_harness(str(guide), "--output-dir", str(output_dir), *args, env=env, timeout_s=timeout_s)
        return Run(done.returncode, done.stdout, done.stderr, output_dir, guide)

    return run


# The drift check's tests (tests/test_drift.py, tests/test_lessons.py) run it in git repositories built per test.
class Repo:
    """A git repository in a temporary directory, with the environment git and the drift check need."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def write(self, name: str, text: str) -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def start(self) -> str:
        """A first commit without guides: the base revision of a pull request that adds them."""
        self.write("README.md", "# Repo\n")
        return self.commit("start")

    def drift(self, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ci.drift", *args],
            cwd=self.path,
            env={**self.env, **extra_env},
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def pypi() -> Iterator[WebStub]:
    """A loopback server standing in for the package index the drift check asks about pinned versions."""
    with running_stub() as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path, pypi: WebStub) -> Repo:
    """An empty git repository in tmp_path/repo, its drift check asking PYPI about pins."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Guide Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Guide Author",
        "GIT_COMMITTER_EMAIL": "author@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONPATH": str(REPO),
        "PYPI_URL": pypi.url,
        "GUIDE_GUARD_HTTP_TIMEOUT": "0.5",
    }
    (tmp_path / "repo").mkdir()
    return Repo(tmp_path / "repo", env)
