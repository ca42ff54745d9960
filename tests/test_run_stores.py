"""Stored values and loads at run time: what a setup stores reaches the blocks that load it, --set gives a value
before the run, and a value that cannot be loaded fails the block that loads it."""

from __future__ import annotations

import json
import re
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


def _polluted_guide() -> str:
    return f"""
        {FENCE}shell #test-setup store="model_path"
        printf 'Downloading: 10%%\\r\\033[2KDownloading: 100%%\\r\\033[2K'
        echo /root/models/qwen
        {FENCE}

        {FENCE}shell #test-setup store="token"
        printf 'fetching the token\\r' ; echo "$HF_TOKEN"
        {FENCE}

        {FENCE}shell #test-setup store="files"
        printf 'config.json\\nweights.bin\\n'
        {FENCE}

        {FENCE}shell #test-setup store="port"
        echo 8080
        {FENCE}

        {FENCE}shell #test id="serve" load="model_path>>MODEL" load="port>>PORT"
        echo "serving <MODEL> on <PORT>" | tr -d '\\r\\033'
        {FENCE}

        {FENCE}shell #test-result id="serve"
        serving ... on 8080
        {FENCE}

        {FENCE}shell #test-setup store="model_path"
        echo /root/models/other
        {FENCE}

        {FENCE}shell #test-setup id="later" load="model_path>>MODEL"
        test -n "<MODEL>"
        {FENCE}
        """


def test_a_stored_value_spanning_lines_or_holding_progress_output_is_warned_of_where_it_is_stored(
    guide_runner,
) -> None:
    secret = "hf_" + "Kq7" * 8
    run = guide_runner(_polluted_guide(), env={"HF_TOKEN": secret, "NO_COLOR": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    log = run.stdout.replace(f"{run.guide}", "guide.md")
    warnings = [line for line in log.splitlines() if line.startswith("warning: [")]
    assert warnings == [
        "warning: [1/7] model_path: the value stored as model_path has 1 line and 60 bytes, holding 2 carriage"
        " returns and 2 terminal control characters (progress output?); loaded by #test id=serve (line 18)."
        " A value is usually one line: print it alone to stdout and the rest to stderr (>&2)",
        f"warning: [2/7] token: the value stored as token has 1 line and {len(secret) + 19} bytes, holding 1 carriage"
        " return (progress output?); loaded by no block."
        " A value is usually one line: print it alone to stdout and the rest to stderr (>&2)",
        "warning: [3/7] files: the value stored as files has 2 lines and 23 bytes; loaded by no block."
        " A value is usually one line: print it alone to stdout and the rest to stderr (>&2)",
    ]
    # each follows its block's verdict, after the value it stored, as a log shows it (what the block loads)
    assert "--- stored model_path (60 bytes)\nDownloading: 10%\nDownloading: 100%\n/root/models/qwen\n[1/7]" in log
    assert "--- stored token (" in log and "\nfetching the token\n***\n[2/7] token: PASSED" in log
    assert secret not in run.stdout + run.stderr  # the value is masked; the warning quotes none of it
    # results.json keeps each warning with its block, as the log gives it
    recorded = [(block["store"], block["warnings"]) for block in run.record["blocks"]]
    counts = [(store, len(warnings)) for store, warnings in recorded]
    assert counts[:4] == [("model_path", 1), ("token", 1), ("files", 1), ("port", 0)], recorded
    assert counts[5] == ("model_path", 0), recorded  # stored again, clean
    assert "the value stored as model_path has 1 line and 60 bytes" in recorded[0][1][0]
    assert secret not in json.dumps(run.record)
    # one clean line is no warning, nor a section: a passing block is still one line
    assert re.search(r"^==> \[4/7\] #test-setup store=port .* -> PASSED in ", log, re.M), log
    assert re.search(r"^==> \[6/7\] #test-setup store=model_path .* -> PASSED in ", log, re.M), log


def test_under_actions_a_warned_stored_value_is_annotated_on_its_setup(guide_runner, tmp_path: Path) -> None:
    github = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "outputs.txt"),
        "HF_TOKEN": "hf_" + "Kq7" * 8,
    }
    run = guide_runner(_polluted_guide(), env=github)
    assert run.returncode == 0, run.stdout + run.stderr
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::warning ")]
    assert [line.split("::")[1] for line in annotations] == [
        f"warning file={run.guide},line=1,title=#test-setup model_path%3A warning",
        f"warning file={run.guide},line=6,title=#test-setup token%3A warning",
        f"warning file={run.guide},line=10,title=#test-setup files%3A warning",
    ]
    assert annotations[0].endswith(
        "; loaded by #test id=serve (line 18). A value is usually one line: print it alone to stdout and the rest to stderr (>&2)"
    )


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
