"""ci.cleanup end to end with real processes: run last, whatever the verdict, even after a stop signal; never a verdict."""

from __future__ import annotations

from pathlib import Path

FENCE = "```"


def test_a_cleanup_runs_after_a_failure_and_a_failing_one_is_said_not_counted(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          collect: ["work/*.log"]
          cleanup:
            - rm -rf work
            - "echo 'cache is busy' >&2; exit 3"
        ---
        {FENCE}shell #test-setup
        mkdir -p work/deep
        echo "the build said this" > work/build.log
        exit 1
        {FENCE}

        {FENCE}shell #test-setup
        echo never
        {FENCE}
        """
    )
    assert run.returncode == 1, run.stdout + run.stderr  # the blocks' status: the failing cleanup adds nothing
    assert not (tmp_path / "work").exists()  # removed, after a failed block
    # collected before the cleanup removed it (teardown, collect, cleanup)
    assert (run.output_dir / f"collected{tmp_path}/work/build.log").read_text() == "the build said this\n"
    cleanup = run.record["guides"][0]["cleanup"]
    assert [(c["command"], c["exit_code"], c["message"]) for c in cleanup] == [
        ("rm -rf work", 0, "exit 0"),
        ("echo 'cache is busy' >&2; exit 3", 3, "exit 3"),
    ]
    assert (run.output_dir / cleanup[1]["output_path"]).read_text() == "cache is busy\n"
    assert cleanup[1]["output_path"] == "blocks/cleanup/2-echo-cache-is-busy-2-exit-3.txt"
    log = run.stdout
    assert "cleanup (ci.cleanup, 2 commands):\n  [1/2] rm -rf work: exit 0 in " in log
    warning = f"warning: cleanup 2/2 failed (exit 3); the verdict stays the blocks'; its output: {run.output_dir}/"
    assert warning in log
    assert "--- cleanup 2/2: echo 'cache is busy' >&2; exit 3 (its output)\ncache is busy\n" in log
    assert log.index("collected 1 file") < log.index("cleanup (ci.cleanup") < log.index("full block outputs")


def test_a_failing_cleanup_leaves_a_green_run_green_with_a_warning_annotation(guide_runner, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    run = guide_runner(
        f"""
        ---
        ci:
          cleanup: ["exit 4"]
        ---
        {FENCE}shell #test-setup
        true
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.record["guides"][0]["failed"] is False
    assert f"::warning file={run.guide},title=cleanup 1/1 failed::exit 4: exit 4; the verdict is the blocks'" in (
        run.stdout
    )
    assert "- 1/1 `exit 4`: exit 4" in summary.read_text(encoding="utf-8")


def test_after_a_stop_signal_cleanups_run_within_the_stopping_time(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          cleanup: ["rm -rf work", "sleep 30", "echo never"]
        ---
        {FENCE}shell #test-setup
        mkdir -p work
        kill -TERM "$(cat out/harness.pid)"
        sleep 30
        {FENCE}
        """
    )
    assert run.returncode == 143, run.stdout + run.stderr
    assert not (tmp_path / "work").exists()
    cleanup = run.record["guides"][0]["cleanup"]
    assert cleanup[0]["exit_code"] == 0
    assert cleanup[1]["message"] == (
        "stopped: the run was stopping and its time after the stop signal was up; its process tree was ended"
    )
    assert (cleanup[2]["output_path"], cleanup[2]["exit_code"]) == (None, None)
    assert cleanup[2]["message"].startswith("not run: the run was stopping")
    assert "warning: cleanup 3/3 failed (not run: the run was stopping" in run.stdout
