"""doc-drift.yml under act: a pull request that breaks a guide's block is red, annotated on the block's line."""

from __future__ import annotations

from collections.abc import Callable

from actrun import ActRunner

JOB = "doc-drift/drift"
DEMO = "docs/examples/demo.md"


def test_a_pull_request_that_breaks_a_block_is_annotated_on_its_line(act: Callable[..., ActRunner]) -> None:
    runner = act(event="pull_request", workflow=".github/workflows/doc-drift.yml")
    base = runner.head()
    guide = runner.workspace / DEMO
    lines = guide.read_text(encoding="utf-8").splitlines(keepends=True)
    broken = lines.index('echo "$DEMO_GREETING"\n') + 1
    lines[broken - 1] = 'echo "$DEMO_GREETING" && && true\n'
    guide.write_text("".join(lines), encoding="utf-8")
    head = runner.commit("a pull request that breaks the greeting block")
    runner.payload = {
        "pull_request": {"number": 7, "base": {"sha": base, "ref": "main"}, "head": {"sha": head, "ref": "broken"}}
    }
    result = runner.run()

    assert result.job(JOB) == "failure"
    assert result.step_results(JOB)["Check the guide registry"] == "success"
    assert result.step_results(JOB)["Check the changed guides"] == "failure"
    errors = [record["kvPairs"] for record in result.commands(JOB, "error")]
    assert errors and all(error.get("file") == DEMO and error.get("line") == str(broken) for error in errors), errors
    notices = [record["kvPairs"] for record in result.commands(JOB, "notice")]
    assert any(notice.get("line") == str(broken - 1) for notice in notices), notices  # the block: re-verify


def test_a_pull_request_that_changes_no_block_passes(act: Callable[..., ActRunner]) -> None:
    runner = act(event="pull_request", workflow=".github/workflows/doc-drift.yml")
    base = runner.head()
    guide = runner.workspace / DEMO
    guide.write_text(guide.read_text(encoding="utf-8") + "\nOne more sentence for readers.\n", encoding="utf-8")
    head = runner.commit("prose only")
    runner.payload = {"pull_request": {"number": 8, "base": {"sha": base, "ref": "main"}, "head": {"sha": head}}}
    result = runner.run()

    assert result.job(JOB) == "success", result.log_file
    assert not result.commands(JOB, "error")
