"""A run's verdict end to end, with real processes: each block's status, the exit code, what the log and the
output files show."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FENCE = "```"


def test_failed_block_stops_the_run_and_shows_stderr(guide_runner) -> None:
    text = f"""
        {FENCE}shell #test-setup
        echo "about to fail"; echo "boom on stderr" >&2; exit 3
        {FENCE}

        {FENCE}shell #test-setup store="later"
        echo never
        {FENCE}
        """
    run = guide_runner(text)
    assert run.returncode == 1
    assert [b["status"] for b in run.blocks] == ["failed", "not_run"]
    assert run.blocks[0]["exit_code"] == 3
    assert "boom on stderr" in run.stdout
    assert "[ERROR] [1/2]" in run.stdout and "exit 3" in run.stdout

    keep_going = guide_runner(text, "--keep-going")
    assert keep_going.returncode == 1
    assert [b["status"] for b in keep_going.blocks] == ["failed", "passed"]


def test_mismatch_reports_diff_and_first_unmatched_line(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="versions"
        printf 'alpha 1\\nbeta 2\\ngamma 3\\n'
        {FENCE}

        {FENCE}shell #test-result id="versions" fuzzy='N'
        alpha N
        beta 3
        gamma N
        {FENCE}
        """
    )
    assert run.returncode == 1
    block = run.block("versions")
    assert block["status"] == "mismatch"
    assert block["first_unmatched_line"] == 2
    # the lines its wildcards match are no change: the hunk sets only `beta` against `beta`
    assert "\n@@ -1,3 +1,3 @@\n alpha 1\n-beta 3\n+beta 2\n gamma 3\n" in run.stdout
    assert "from its line 2: 'beta 3'" in run.stdout


def test_stdout_only_is_matched_and_trailing_newlines_are_allowed(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}bash #test id="t"
        echo "noise" >&2; printf 'out\\n\\n\\n'
        {FENCE}

        {FENCE}shell #test-result id="t"
        out
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout
    assert run.block("t")["status"] == "passed"


def test_an_empty_result_expects_no_output(guide_runner) -> None:
    # authoring.md, section 12: the original engine refuses an empty #test-result; here it means "prints nothing"
    run = guide_runner(
        f"""
        {FENCE}shell #test id="quiet"
        echo "only on stderr" >&2
        {FENCE}

        {FENCE}shell #test-result id="quiet"
        {FENCE}

        {FENCE}shell #test id="talks"
        echo "something"
        {FENCE}

        {FENCE}shell #test-result id="talks"
        {FENCE}
        """,
        "--keep-going",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert [run.block("quiet")["status"], run.block("talks")["status"]] == ["passed", "mismatch"], run.stdout


def test_output_files_hold_what_blocks_printed_and_nothing_else(guide_runner) -> None:
    """An empty stream keeps no file; blocks that never ran leave none; a late writer's file is kept."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="quiet"
        true
        {FENCE}

        {FENCE}shell #test-setup store="both"
        echo out; echo err >&2
        {FENCE}

        {FENCE}shell #test-setup store="late"
        (sleep 2; echo "written after the block ended" >&2; touch late-done) &
        {FENCE}

        {FENCE}shell #test-setup store="skipped" skip="not today"
        echo never
        {FENCE}

        {FENCE}shell #test-setup store="fails"
        for i in $(seq 300); do [ -e late-done ] && break; sleep 0.1; done; exit 4
        {FENCE}

        {FENCE}shell #test-setup store="after"
        echo never either
        {FENCE}
        """
    )
    assert run.returncode == 1, run.stdout
    quiet, both, late = run.block("quiet"), run.block("both"), run.block("late")
    assert (quiet["stdout_path"], quiet["stderr_path"]) == (None, None)
    assert (run.output_dir / both["stdout_path"]).read_text() == "out\n"
    assert (run.output_dir / both["stderr_path"]).read_text() == "err\n"
    # the background writer still held stderr when the block ended, so its file was kept for it
    assert (run.output_dir / late["stderr_path"]).read_text() == "written after the block ended\n"
    files = sorted(path.name for path in (run.output_dir / "blocks").iterdir())
    assert files == [
        "002-both.stderr.txt",
        "002-both.stdout.txt",
        "003-late.stderr.txt",
        "003-late.stdout.txt",  # empty, but its writer was still alive when the block ended
    ]
    assert [b["status"] for b in run.blocks[3:]] == ["skipped", "failed", "not_run"]


def test_unicode_garbage_nul_and_ansi_do_not_break_the_reports(guide_runner, tmp_path: Path) -> None:
    import junitparser

    run = guide_runner(
        f"""
        {FENCE}shell #test id="noise"
        printf 'caf\\xc3\\xa9 \\xff\\xfe bad\\x00nul \\033[31mred\\033[0m\\n'
        printf 'Traceback (most recent call last)\\n\\x00\\xff' >&2
        exit 1
        {FENCE}

        {FENCE}shell #test-result id="noise"
        café
        {FENCE}
        """,
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert run.returncode == 1
    assert "café \ufffd\ufffd badnul red" in run.stdout
    assert "\x1b" not in run.stdout and "\x00" not in run.stdout
    record = json.loads((run.output_dir / "results.json").read_text())
    assert record["blocks"][0]["status"] == "failed"
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == 1
    assert "\x1b" not in (tmp_path / "junit.xml").read_text()


def test_error_markers_show_stderr_of_a_passing_block(guide_runner) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          error_markers: [ERR99999]
        ---
        {FENCE}shell #test-setup
        echo "EZ9999: ERR99999 device error" >&2; echo fine
        {FENCE}

        {FENCE}shell #test-setup
        echo "quiet warning" >&2; echo fine
        {FENCE}
        """
    )
    assert run.returncode == 0
    assert "EZ9999: ERR99999 device error" in run.stdout
    assert "contains 'ERR99999'" in run.stdout
    assert "quiet warning" not in run.stdout
    assert run.blocks[0]["error_marker"] == "ERR99999"


def test_skip_parameter_reports_skipped(guide_runner, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup skip='needs an NPU'
        exit 1
        {FENCE}
        """,
        "--junit",
        str(junit),
    )
    assert run.returncode == 0
    assert run.blocks[0]["status"] == "skipped"
    assert run.blocks[0]["message"] == "needs an NPU"
    assert "<skipped" in junit.read_text()


def test_a_report_that_cannot_be_written_does_not_cost_the_verdict(guide_runner, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        rm -r {reports} && touch {reports}  # the JUnit report's directory goes away while the run is on
        {FENCE}
        """,
        "--junit",
        str(reports / "junit.xml"),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"[ERROR] could not write the JUnit report to {reports / 'junit.xml'}" in run.stderr
    assert "PASSED" in run.stdout and "full block outputs:" in run.stdout
    assert run.blocks[0]["status"] == "passed"  # results.json was still written


def test_stream_shows_output_while_the_block_runs(tmp_path: Path, harness_env: dict[str, str]) -> None:
    flag = tmp_path / "go"
    guide = tmp_path / "g.md"
    guide.write_text(
        f"{FENCE}shell #test-setup\necho 'first line, live'\n"
        f"while [ ! -e {flag} ]; do sleep 0.05; done\necho 'second line'\n{FENCE}\n"
    )
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--stream", "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env=harness_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None
    seen = []
    for line in harness.stdout:  # the block is still waiting for the flag when this line arrives
        seen.append(line)
        if "first line, live" in line:
            break
    flag.touch()
    rest, _ = harness.communicate(timeout=60)
    assert harness.returncode == 0
    assert "second line" in rest


def test_the_demo_guide_passes(tmp_path: Path, run_harness) -> None:
    demo = Path(__file__).resolve().parents[1] / "docs" / "examples" / "demo.md"
    done = run_harness(str(demo), "--output-dir", str(tmp_path / "out"), timeout_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {b["status"] for b in record["blocks"]} == {"passed"}
    assert record["guides"][0]["processes_ended"], "the demo's background server is ended and listed"


def test_a_block_after_one_that_removed_the_output_directory_says_so(tmp_path: Path, guide_runner) -> None:
    out = tmp_path / "out"
    done = guide_runner(
        f'{FENCE}shell #test-setup id="removes"\nrm -rf "{out}"\n{FENCE}\n\n'
        f'{FENCE}shell #test-setup id="next"\necho hi\n{FENCE}\n',
        "--keep-going",
        name="g.md",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the directory of its output files, {out / 'blocks'}, is gone" in done.stdout + done.stderr
    assert "on PATH" not in done.stdout + done.stderr
