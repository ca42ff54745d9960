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
    """The stop comes during the block: the cleanups still start, sharing the stopping time; the one running when it
    is up is ended, the rest are not started. (What each gets of that time depends on the machine's load: the
    first always starts, as its window opens when the cleanups first see the stop, and `sleep 30` outlasts it.)"""
    run = guide_runner(
        f"""
        ---
        ci:
          cleanup: ["echo started > cleanup-ran; sleep 30", "echo never > never-ran"]
        ---
        {FENCE}shell #test-setup
        kill -TERM "$(cat out/harness.pid)"
        sleep 30
        {FENCE}
        """
    )
    assert run.returncode == 143, run.stdout + run.stderr
    cleanup = run.record["guides"][0]["cleanup"]
    assert cleanup[0]["output_path"] is not None and cleanup[0]["exit_code"] != 0
    assert cleanup[0]["message"] == (
        "stopped: the run was stopping and its time after the stop signal was up; its process tree was ended"
    )
    assert (cleanup[1]["output_path"], cleanup[1]["exit_code"]) == (None, None)
    assert cleanup[1]["message"].startswith("not run: the run was stopping")
    assert not (tmp_path / "never-ran").exists()
    assert "warning: cleanup 2/2 failed (not run: the run was stopping" in run.stdout
