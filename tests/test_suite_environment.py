"""The suite itself run under GitHub Actions: the job's own files and variables stay out of its tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Real tests that write a step summary or step outputs, or that read the log's Actions form, each setting
# GITHUB_ACTIONS=true itself but naming no summary or outputs file of their own.
WRITERS = [
    "tests/test_reports.py::test_at_most_ten_annotations_first_failure_first",
    "tests/test_reports.py::test_document_errors_become_annotations",
    "tests/test_log.py::test_no_colour_in_a_pipe_nor_with_no_color_under_actions",
    "tests/test_compat.py::test_cli_reports_document_errors_with_file_and_line",
]
# The files the runner gives every step, which a test must neither inherit nor write.
JOB_FILES = ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_STATE")


def test_tests_never_write_into_the_jobs_own_files(tmp_path: Path) -> None:
    files = {name: tmp_path / name.lower() for name in JOB_FILES}
    for path in files.values():
        path.touch()
    job = {name: str(path) for name, path in files.items()}
    job |= {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(REPO), "RUNNER_TEMP": str(tmp_path)}
    # one worker, in this process's place: the session is small, and xdist's own workers would only add time
    session = ["-q", "-n", "0", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner")]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *session, *WRITERS],
        cwd=REPO,
        env={**os.environ, **job},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(WRITERS)} passed" in done.stdout, done.stdout
    written = {name: path.read_text(encoding="utf-8") for name, path in files.items() if path.stat().st_size}
    assert not written, f"the tests wrote into the job's files: {written}"
