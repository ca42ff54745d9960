"""guide-run.yml called from another repository, by docs/ci.md's documented caller, under act in host mode.

The caller's repository holds its guide and the documented workflow, and nothing of guide-guard; guide-guard
is the working tree's copy, which act reads as the repository the caller's `uses:` names (--local-repository).
What stays static (tests/test_guides_workflow.py checks it): the container fields. Host mode runs the job on
this machine, so the caller's image is left out here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from actrun import REPO, ActRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from workflows import documented_caller

GUIDE_GUARD = "guide-guard-org/guide-guard"  # the OWNER/guide-guard of the documented `uses:` line
CALLER_WORKFLOW = ".github/workflows/quickstart-npu.yml"
RUN_JOB = "guide/guide run/docs/quickstart.md"  # act: CALLER-JOB/CALLED-WORKFLOW/JOB


def caller_repository(directory: Path, commit: str) -> None:
    """Another repository: its guide (docs/examples/demo.md, as docs/quickstart.md) and the documented caller."""
    text = documented_caller().replace("OWNER/guide-guard", GUIDE_GUARD).replace("COMMIT_SHA", commit)
    lines = text.splitlines(keepends=True)
    [image] = [i for i, line in enumerate(lines) if line.strip().startswith("image:")]
    lines[image] = lines[image].split("image:")[0] + 'image: ""\n'  # host mode: no container
    (directory / ".github" / "workflows").mkdir(parents=True)
    (directory / CALLER_WORKFLOW).write_text("".join(lines), encoding="utf-8")
    (directory / "docs").mkdir()
    shutil.copy2(REPO / "docs" / "examples" / "demo.md", directory / "docs" / "quickstart.md")
    identity = ["-c", "user.name=act scenario", "-c", "user.email=act@example.invalid"]
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], [*identity, "commit", "-q", "-m", "a guide"]):
        subprocess.run(["git", *argv], cwd=directory, check=True, capture_output=True)


def test_the_documented_caller_runs_its_guide_with_guide_guard_at_the_pinned_commit(
    act: Callable[..., ActRunner],
) -> None:
    runner = act(workflow=CALLER_WORKFLOW)
    guide_guard = runner.workspace
    commit = runner.head()
    # what GitHub gives as the job context's workflow_repository and workflow_sha, which act does not know,
    # written in their place in the called workflow act reads (the commit it checks out stays as it was)
    called = guide_guard / ".github" / "workflows" / "guide-run.yml"
    text = called.read_text(encoding="utf-8")
    assert "job.workflow_repository ||" in text and "job.workflow_sha ||" in text
    text = text.replace("job.workflow_repository", f"'{GUIDE_GUARD}'").replace("job.workflow_sha", f"'{commit}'")
    called.write_text(text, encoding="utf-8")
    runner.workspace = runner.base / "caller"
    caller_repository(runner.workspace, commit)
    runner.extra_args += ["--local-repository", f"{GUIDE_GUARD}@{commit}={guide_guard}"]
    runner.env["ACT_STANDIN_REPOSITORIES"] = f"{GUIDE_GUARD}={guide_guard}"

    result = runner.run()

    assert result.returncode == 0, result.why()
    assert result.job(RUN_JOB) == "success"
    outputs = result.outputs(RUN_JOB, "guide")
    assert (outputs["verdict"], json.loads(outputs["counts"])) == ("passed", {"passed": 8})
    # the guide is the caller's, run by the guide-guard of the pinned commit, checked out beside it
    assert f"cloned {guide_guard} at {commit}" in result.output_text(RUN_JOB)
    report = result.artifact("quickstart-npu-attempt-1")
    record = json.loads((report / "outputs" / "results.json").read_text())
    assert record["exit_status"] == 0 and record["guides"][0]["guide"] == "docs/quickstart.md"
    status = json.loads((result.artifact("guide-status-quickstart-npu") / "quickstart-npu.json").read_text())
    assert status["verdict"] == "passed" and status["guide"] == "docs/quickstart.md"
