"""Stored values and loads at run time: what a setup stores reaches the blocks that load it, --set gives a value
before the run, and a value that cannot be loaded fails the block that loads it."""

from __future__ import annotations

from pathlib import Path

FENCE = "```"


def test_store_load_and_wildcards_pass(guide_runner) -> None:
    run = guide_runner(
        f"""
        # Demo
        {FENCE}shell #test-setup store="who"
        echo "world  "
        {FENCE}

        {FENCE}shell #test id="greet" load="who>>NAME"
        echo "hello <NAME>"
        echo "pid $$"
        {FENCE}

        {FENCE}shell #test-result id="greet"
        hello world
        pid ...
        {FENCE}
        """,
        "-v",  # a passing block's sections, shown with --verbose
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.statuses() == {"who": "passed", "greet": "passed"}
    assert run.block("who")["captured"] == {"who": "world"}
    assert "stored who (5 bytes)" in run.stdout  # trailing whitespace removed
    greet = run.block("greet")
    assert greet["exit_code"] == 0
    assert greet["line"] == 6
    assert len(greet["code_sha256"]) == 64
    assert (run.output_dir / greet["stdout_path"]).read_text().startswith("hello world\n")


def test_a_stored_value_with_a_nul_byte_fails_the_block_that_loads_it_and_the_run_goes_on(
    guide_runner, tmp_path: Path
) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="TOKENISH"
        printf 'abc\\0def'
        {FENCE}

        {FENCE}shell #test-setup id="uses-it" load="TOKENISH>>VALUE"
        echo "<VALUE>"
        {FENCE}

        {FENCE}shell #test-setup id="after"
        echo still here
        {FENCE}
        """,
        "--keep-going",
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    uses_it = run.block("uses-it")
    assert uses_it["status"] == "error"
    assert "the stored value of TOKENISH holds a NUL byte" in uses_it["message"]
    assert run.block("after")["status"] == "passed"
    assert "<testsuite" in (tmp_path / "junit.xml").read_text()


def test_load_of_a_value_never_stored_at_run_time_is_an_error(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="path" skip="no data here"
        echo /data
        {FENCE}

        {FENCE}shell #test id="use" load="path>>P"
        echo <P>
        {FENCE}

        {FENCE}shell #test-result id="use"
        /data
        {FENCE}
        """,
    )
    assert run.returncode == 1
    assert run.block("use")["status"] == "error"
    assert "path was never stored" in run.stdout


def test_set_pre_stores_a_value(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="ref" load="upstream_ref>>ref"
        echo "checkout <ref>"
        {FENCE}

        {FENCE}shell #test-result id="ref"
        checkout v1.2.3
        {FENCE}
        """,
        "--set",
        "upstream_ref=v1.2.3",
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_set_lines_pre_stores_a_value_a_line_and_a_set_of_the_same_name_wins(guide_runner) -> None:
    guide = f"""
        {FENCE}shell #test id="ref" load="upstream_ref>>ref" load="model>>model"
        echo "checkout <ref> of <model>"
        {FENCE}

        {FENCE}shell #test-result id="ref"
        checkout v1.2.3 of org/model
        {FENCE}
        """
    # a workflow input of one value a line, as the action hands it on: empty lines skipped
    lines = "upstream_ref=v0.0.1\n\nmodel=org/model\n"
    run = guide_runner(guide, "--set-lines", lines, "--set", "upstream_ref=v1.2.3")
    assert run.returncode == 0, run.stdout + run.stderr
    refused = guide_runner(guide, "--set-lines", "upstream_ref=v1.2.3\nmodel")
    assert refused.returncode == 2
    assert "--set-lines 'model': write NAME=VALUE, one a line" in refused.stderr, refused.stderr
