"""guides.yml under act: the registry's matrix, guide-run.yml, the composite action, the status and the board."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable

from actrun import ActRunner

# act names a called workflow's jobs CALLER-JOB/CALLED-WORKFLOW/JOB; the matrix job's caller is the entry's name
DEMO = "docs/examples/demo.md"
RUN_JOB = "demo/guide run/docs/examples/demo.md"
STATUS_JOB = "demo/guide run/status (for the board)"


def test_a_dispatched_entry_runs_end_to_end_to_the_board(act: Callable[..., ActRunner]) -> None:
    result = act(inputs={"name": "demo"}).run()

    assert result.returncode == 0, result.why()
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


def guide_lines(runner: ActRunner) -> list[str]:
    return (runner.workspace / DEMO).read_text(encoding="utf-8").splitlines()


def edit_guide(runner: ActRunner, old: str, new: str) -> int:
    """Replaces `old` in the workspace's demo guide; returns the 1-based line where `new` starts."""
    guide = runner.workspace / DEMO
    text = guide.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not in {DEMO} exactly once"
    guide.write_text(text.replace(old, new), encoding="utf-8")
    return text[: text.index(old)].count("\n") + 1


def test_a_failing_guide_is_red_with_its_line_annotated_and_its_reports_kept(act: Callable[..., ActRunner]) -> None:
    runner = act(inputs={"name": "demo"})
    wrong_line = edit_guide(runner, "hello from the front matter\n```", "hello from the back matter\n```")
    result = runner.run()

    assert result.returncode != 0
    assert result.job(RUN_JOB) == "failure"
    outputs = result.outputs(RUN_JOB, "guide")
    assert (outputs["verdict"], outputs["exit_status"]) == ("failed", "1")
    assert outputs["failing"].startswith("greeting")
    # the annotation a maintainer sees on the pull request's or run's page: the guide's own line
    errors = [record["kvPairs"] for record in result.commands(RUN_JOB, "error") if record.get("kvPairs")]
    assert {"file": DEMO, "line": str(wrong_line)}.items() <= errors[0].items(), errors
    assert any("docs/examples/demo.md: failed" in summary for summary in result.summaries(RUN_JOB))
    # the reports are uploaded although the guide failed, and the status says failed
    record = json.loads((result.artifact("demo-attempt-1") / "outputs" / "results.json").read_text())
    assert {block["id"]: block["status"] for block in record["blocks"]}["greeting"] == "mismatch"
    assert json.loads((result.artifact("guide-status-demo") / "demo.json").read_text())["verdict"] == "failed"
    # act limit: a failure inside a called workflow stops the caller's later jobs, `always()` or not
    # (GitHub runs the board); so the board is not asserted here


def test_a_cancelled_run_stops_the_harness_and_keeps_its_reports(act: Callable[..., ActRunner]) -> None:
    runner = act(inputs={"name": "demo"})
    fence_line = edit_guide(
        runner,
        "## Start a server in the background\n",
        '```shell #test id="wait"\nsleep 300\n```\n\n```shell #test-result id="wait"\n```\n\n'
        "## Start a server in the background\n",
    )
    run = runner.start()
    # the harness names the block as it starts it
    run.wait_for(f"at {DEMO}:{fence_line}")
    run.interrupt()
    result = run.wait()

    stop = "Stop the harness (the run was cancelled)"
    assert result.step_results(RUN_JOB).get(stop) == "success", result.step_results(RUN_JOB)
    # the stop step finds the harness still ending, or already ended: act's SIGHUP reaches it on the host
    assert "its reports are in guide-guard-report" in result.output_text(RUN_JOB)
    record = json.loads((result.artifact("demo-attempt-1") / "outputs" / "results.json").read_text())
    # act's host mode hangs up a cancelled step's terminal, so the harness hears SIGHUP first (GitHub's
    # runner sends SIGINT; in a container nothing reaches it: tests/act/test_container.py)
    assert record["guides"][0]["interrupted_by_signal"] == signal.SIGHUP
    assert record["exit_status"] == 128 + signal.SIGHUP
    wait = next(block for block in record["blocks"] if block["id"] == "wait")
    assert (wait["status"], wait["message"].split(" after")[0]) == ("error", "interrupted by SIGHUP")
    assert [process["command"] for process in wait["processes_ended"]] == ["sleep 300"]


def test_an_entrys_secret_reaches_its_blocks_masked_and_no_other_secret_does(act: Callable[..., ActRunner]) -> None:
    named, other = "idx-pa55w0rd-4f9c2e", "other-t0ken-77aa31"
    runner = act(inputs={"name": "demo"}, secrets={"PRIVATE_INDEX_AUTH": named, "OTHER_TOKEN": other})
    # no workflow edit: the entry names the secret, and a block of its guide shows what it sees
    registry = runner.workspace / "guides.yaml"
    entry = f"guide: {DEMO}\n"
    registry.write_text(registry.read_text().replace(entry, f"{entry}    secrets: [PRIVATE_INDEX_AUTH]\n", 1))
    with (runner.workspace / DEMO).open("a", encoding="utf-8") as guide:
        guide.write(
            "\n```shell #test-setup id=\"secrets\"\nenv | grep -E '^(PRIVATE_INDEX_AUTH|OTHER_TOKEN)=' | sort\n```\n"
        )
    result = runner.run()

    assert result.returncode == 0, result.why()
    report = result.artifact("demo-attempt-1")
    [shown] = (report / "outputs" / "blocks").glob("*-secrets.stdout.txt")
    assert shown.read_text() == "PRIVATE_INDEX_AUTH=***\n"  # there, and masked in the uploaded file too
    kept = [path.read_text(errors="replace") for path in report.rglob("*") if path.is_file()]
    assert not [text for text in kept if named in text or other in text]
