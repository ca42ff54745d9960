"""The weekly schedule under act, two nights in a row: the monitor decides, the run is recorded, then skipped."""

from __future__ import annotations

import json
from collections.abc import Callable

from actrun import ActRunner

WEEKLY = {"schedule": "0 20 * * 6"}  # guides.yml's weekly cron: the group the demo entry is in
PREFIX = "demo/guide run/"


def test_two_nights_the_first_runs_and_is_recorded_the_second_finds_no_reason(
    act: Callable[..., ActRunner],
) -> None:
    # the monitor's state lives in the (stand-in) cache, shared by both nights; each night is a new run id
    first = act(event="schedule", payload=WEEKLY, env={"GITHUB_RUN_ID": "101"})
    night_1 = first.run("night-1")

    assert night_1.returncode == 0, night_1.why()
    assert night_1.job(PREFIX + "decide (ci.monitor)") == "success"
    assert night_1.outputs(PREFIX + "decide (ci.monitor)", "monitor")["need_to_test"] == "true"
    assert night_1.job(PREFIX + "docs/examples/demo.md") == "success"
    assert night_1.job(PREFIX + "record the outcome (ci.monitor)") == "success"
    assert "harness verdict: passed" in night_1.output_text(PREFIX + "record the outcome (ci.monitor)")
    status_1 = json.loads((night_1.artifact("guide-status-demo") / "demo.json").read_text())
    assert status_1["verdict"] == "passed"

    first.env["GITHUB_RUN_ID"] = "102"
    night_2 = first.run("night-2")

    assert night_2.returncode == 0, night_2.why()
    assert night_2.outputs(PREFIX + "decide (ci.monitor)", "monitor")["need_to_test"] == "false"
    ran = night_2.jobs()
    assert PREFIX + "docs/examples/demo.md" not in ran and PREFIX + "record the outcome (ci.monitor)" not in ran
    status_2 = json.loads((night_2.artifact("guide-status-demo") / "demo.json").read_text())
    assert status_2["verdict"] == "not_run"
    # the board carries the last outcome forward for a guide not run tonight: night 1's, with its run
    board = (night_2.artifact("guide-board") / "board.md").read_text()
    [demo_row] = [line for line in board.splitlines() if line.startswith("| demo |")]
    assert "✅ passed (8 passed)" in demo_row and demo_row.endswith("/actions/runs/101) |"), board
