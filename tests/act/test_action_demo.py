"""action-demo.yml under act: the composite action as another repository uses it, on the job's own Python."""

from __future__ import annotations

import json
from collections.abc import Callable

from actrun import ActRunner

JOB = "action-demo/demo"


def test_the_action_runs_the_demo_and_its_blocks_get_the_jobs_python(act: Callable[..., ActRunner]) -> None:
    result = act(event="push", workflow=".github/workflows/action-demo.yml").run()

    assert result.returncode == 0, result.why()
    assert result.job(JOB) == "success"
    assert result.outputs(JOB, "demo")["verdict"] == "passed"
    assert result.step_results(JOB)["The outputs and the reports are where the action says"] == "success"
    # setup-python's Python, first on the job's PATH, is the one the guide's blocks ran: the action's
    # login environment must not give them the machine's Python instead (Debian's /etc/profile resets PATH)
    job_python = result.outputs(JOB, "1")["python-version"]
    # the scenario proves something only where the job's Python (3.12) is not the machine's default
    assert job_python.startswith("3.12."), f"setup-python's stand-in found no Python 3.12: {job_python}"
    report = result.artifact("action-demo-report")
    assert (report / "outputs" / "blocks" / "003-check-python.stdout.txt").read_text() == f"Python {job_python}\n"
    record = json.loads((report / "outputs" / "results.json").read_text())
    assert record["exit_status"] == 0
