"""guides.yml under act: the registry's matrix, guide-run.yml, the composite action, the status and the board."""

from __future__ import annotations

import json
from collections.abc import Callable

from actrun import ActRunner

# act names a called workflow's jobs CALLER-JOB/CALLED-WORKFLOW/JOB; the matrix job's caller is the entry's name
RUN_JOB = "demo/guide run/docs/examples/demo.md"
STATUS_JOB = "demo/guide run/status (for the board)"


def test_a_dispatched_entry_runs_end_to_end_to_the_board(act: Callable[..., ActRunner]) -> None:
    result = act(inputs={"name": "demo"}).run()

    assert result.returncode == 0, result.log_file
    assert result.jobs() == {
        "guides/read the registry": "success",
        RUN_JOB: "success",
        STATUS_JOB: "success",
        "guides/status board": "success",
    }
    # the harness's outcome, as the action's step outputs (what `record` and `status` read)
    outputs = result.outputs(RUN_JOB, "guide")
    assert outputs["verdict"] == "passed"
    assert outputs["exit_status"] == "0"
    assert json.loads(outputs["counts"]) == {"passed": 8}
    assert any("docs/examples/demo.md: passed" in summary for summary in result.summaries(RUN_JOB))

    report = result.artifact("demo-attempt-1")
    record = json.loads((report / "outputs" / "results.json").read_text())
    assert record["exit_status"] == 0
    assert {block["status"] for block in record["blocks"]} == {"passed"}
    assert (report / "junit.xml").stat().st_size > 0

    status = json.loads((result.artifact("guide-status-demo") / "demo.json").read_text())
    assert status["verdict"] == "passed"
    assert status["counts"] == {"passed": 8}

    board = result.artifact("guide-board")
    assert json.loads((board / "demo.json").read_text())["verdict"] == "passed"
    board_text = (board / "board.md").read_text()
    assert "| demo | ✅ passed (8 passed)" in board_text
    assert "| specforge-npu | ⏸️ not run" in board_text
    assert any("| demo | ✅ passed" in summary for summary in result.summaries("guides/status board"))
