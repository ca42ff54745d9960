"""The suite's own scheduling: tests of one xdist_group run on one worker (the guide-ports tests bind fixed ports)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("guide-ports")


@pytest.mark.parametrize("case", range(8))
def test_grouped(case):
    with open(os.environ["WORKERS_FILE"], "a") as workers:
        workers.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_a_group_runs_on_one_worker_as_the_suites_addopts_ask(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    workers_file = tmp_path / "workers.txt"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    ran = subprocess.run(
        [*command, "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "WORKERS_FILE": str(workers_file)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    workers = workers_file.read_text(encoding="utf-8").split()
    assert len(workers) == 8
    assert len(set(workers)) == 1, f"one group ran on {sorted(set(workers))}: is pytest 9.2 or later installed?"
