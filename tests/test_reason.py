"""The end of the log says why: each block that did not pass carries a reason, the same in every report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ci.base.streams import read_tail
from ci.base.text import Masker, installed
from ci.guide.model import Problem
from ci.report.recap import did_not_pass_line
from ci.runner.reason import REASON_CHARS, failure_line, merged_failure_line, reason_text

FENCE = "```"
MARKERS = ("[ERROR]", "Traceback (most recent call last)")

TRACEBACK = """Traceback (most recent call last):
  File "serve.py", line 9, in <module>
    main()
  File "serve.py", line 5, in main
    raise RuntimeError("NPU 3 is busy")
RuntimeError: NPU 3 is busy
"""


@pytest.mark.parametrize(
    ("stderr", "stdout", "expected"),
    [
        # the guide's own FAILED line, whatever follows it
        ("waiting\nFAILED: server never became ready\nserver log tail\n", "", "FAILED: server never became ready"),
        ("[ERROR] cannot reach the hub\nretrying\n", "", "[ERROR] cannot reach the hub"),
        ("ERROR - disk full\nFAILED - step 2\n", "", "FAILED - step 2"),  # the last one
        # a traceback stands for its exception line, not its header
        (TRACEBACK, "", "RuntimeError: NPU 3 is busy"),
        ('Traceback (most recent call last):\n  File "x.py", line 1\n', "", "Traceback (most recent call last):"),
        (TRACEBACK + "[ERROR] the trainer gave up\n", "", "[ERROR] the trainer gave up"),
        # a chained traceback: the last exception
        (
            TRACEBACK
            + "\nDuring handling of the above exception, another exception occurred:\n\n"
            + TRACEBACK.replace("RuntimeError: NPU 3 is busy", "OSError: no card"),
            "",
            "OSError: no card",
        ),
        # no failure line: stderr's last line, else stdout's
        ("0 errors, 2 warnings\nconnection refused\n\n", "ok\n", "connection refused"),
        # a guide's check may say so on stdout (`echo "FAILED - ..."`, a command run with 2>&1)
        (
            "trainer: waiting for a batch\n",
            "FAILED - no step line after 60s\nkilled\n",
            "FAILED - no step line after 60s",
        ),
        ("", "step 0\n" + TRACEBACK, "RuntimeError: NPU 3 is busy"),
        ("", "about to fail\n\n", "about to fail"),
        (" \n", "last words", "last words"),
        ("", "", None),
        # what a log hides is gone: a progress bar's carriage returns end lines, escapes are dropped
        ("10%\r50%\r\x1b[31mFAILED\x1b[0m at 50%\r", "", "FAILED at 50%"),
    ],
)
def test_the_failure_line_is_the_last_line_that_says_so(stderr: str, stdout: str, expected: str | None) -> None:
    assert failure_line(stderr, stdout, MARKERS) == expected


def test_a_guides_own_marker_makes_a_failure_line() -> None:
    stderr = "ERR99999 the device is lost\nteardown done\n"
    assert failure_line(stderr, "", MARKERS) == "teardown done"
    assert failure_line(stderr, "", (*MARKERS, "ERR99999")) == "ERR99999 the device is lost"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # stderr and stdout in one file (the fences dialect): what a label block's stderr would end with, not the
        # lines printed after it
        ("building\nerror: could not frobnicate\ncleaning up\n", "error: could not frobnicate"),
        ("gcc: error: x.c: no such file\nmake: leaving\n", "gcc: error: x.c: no such file"),
        ("fatal: not a git repository\nbye\n", "fatal: not a git repository"),
        ("bash: line 1: cmkae: command not found\ndone\n", "bash: line 1: cmkae: command not found"),
        ("step 0\n" + TRACEBACK + "cleaning up\n", "RuntimeError: NPU 3 is busy"),
        ("error: first\nERR99999 the device is lost\nbye\n", "ERR99999 the device is lost"),  # a marker first
        # no complaint: the last line, as before ("0 errors:" and "terror:" are none)
        ("0 errors: none\nterror: not one\nall done\n", "all done"),
        ("", None),
    ],
)
def test_merged_output_gives_the_line_a_label_blocks_stderr_would(output: str, expected: str | None) -> None:
    assert merged_failure_line(output, (*MARKERS, "ERR99999")) == expected


def test_the_reason_is_masked_before_it_is_cut_and_adds_the_warnings() -> None:
    secret = "hf_" + "s3cr3t" * 4
    masker = Masker.of([secret])
    line = "x" * (REASON_CHARS - 10) + f" token {secret} refused"  # the cut falls inside the secret
    with installed(masker):  # the run's policy, as a run installs it
        reason = reason_text(line, ())
    assert reason is not None and secret[:6] not in reason and reason.endswith(" [...]")
    assert len(reason) == REASON_CHARS + len(" [...]")
    warnings = [Problem("g.md", 7 + n, f"<P{n}> is left as written") for n in range(5)]
    assert reason_text("FAILED: no port", warnings) == (
        "FAILED: no port; warning at line 7: <P0> is left as written; warning at line 8: <P1> is left as written;"
        " warning at line 9: <P2> is left as written; and 2 more warnings"
    )
    assert reason_text(None, warnings[:1]) == "warning at line 7: <P0> is left as written"
    assert reason_text(None, ()) is None


def test_the_tail_read_starts_at_a_line_or_past_a_secret_the_cut_falls_in(tmp_path: Path) -> None:
    stream = tmp_path / "stderr"
    stream.write_text("line one\nline two\n")
    assert read_tail(str(stream), 10) == "line two\n"  # the cut falls in line one: it is left out
    assert read_tail(str(stream), 9) == "line two\n"  # the cut falls before line two: it is kept
    assert read_tail(str(stream), 100) == "line one\nline two\n"
    assert read_tail(None, 100) == ""
    secret = "hf_" + "s3cr3t" * 4
    stream.write_text("x" * 10 + secret + "y" * 40)  # one line longer than the read, cut inside the secret
    assert read_tail(str(stream), 50, Masker.of([secret])) == "y" * 40


def _guide() -> str:
    return f"""
        {FENCE}shell #test-setup store="PORT"
        echo 8080
        {FENCE}

        {FENCE}shell #test-setup id="serve"
        echo "starting the server" >&2
        echo "FAILED: server never became ready" >&2
        echo "see /tmp/server.log" >&2
        exit 1
        {FENCE}

        {FENCE}python #test-setup id="crash"
        raise RuntimeError("the model is missing")
        {FENCE}

        {FENCE}shell #test-setup id="leak"
        echo "the hub refused the token $HF_TOKEN" >&2
        exit 1
        {FENCE}

        {FENCE}shell #test-setup id="long"
        echo "ERROR: the first try failed" >&2
        head -c 5000000 /dev/zero | tr '\\0' x >&2
        printf '\\nthe second try failed too\\n' >&2
        exit 1
        {FENCE}

        {FENCE}shell #test-setup id="unloaded"
        [ "<PORT>" = 8080 ] || exit 7
        {FENCE}

        {FENCE}shell #test id="drifted"
        echo two
        {FENCE}

        {FENCE}shell #test-result id="drifted"
        one
        {FENCE}
        """


def test_every_report_ends_with_the_same_reason(guide_runner, tmp_path: Path) -> None:
    secret = "hf_" + "Zq8" * 8
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    github = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)}
    run = guide_runner(
        _guide(),
        "--keep-going",
        "--junit",
        str(tmp_path / "junit.xml"),
        env={**github, "HF_TOKEN": secret, "NO_COLOR": "1"},
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    unloaded_line = run.guide.read_text().splitlines().index('[ "<PORT>" = 8080 ] || exit 7') + 1
    reasons = {block["id"] or block["store"]: block["reason"] for block in run.blocks}
    assert reasons == {
        "PORT": None,  # it passed
        "serve": "FAILED: server never became ready",
        "crash": "RuntimeError: the model is missing",
        "leak": "the hub refused the token ***",
        # only the end of a long stream is read: the failure line 5 MB before it is not looked for
        "long": "the second try failed too",
        "unloaded": f"warning at line {unloaded_line}: <PORT> is left as written: no load of this block replaces it,"
        f' though #test-setup store=PORT at line 1 stores PORT; add load="PORT>>PORT" to its fence at line'
        f" {unloaded_line - 1}",
        "drifted": None,  # its message names the line that failed
    }
    failing = [block for block in run.blocks if block["status"] != "passed"]
    # the recap ends the log (before the verdict), each line as ci.rehearsal rebuilds it from results.json
    recap = [
        did_not_pass_line(
            status=block["status"],
            name=block["id"],
            where=f"{block['guide']}:{block['failure_line']}",
            message=block["message"],
            reason=block["reason"],
        )
        for block in failing
    ]
    lines = run.stdout.splitlines()
    assert lines[-len(recap) - 1 : -1] == recap
    assert lines[-len(recap) - 2] == f"{len(recap)} blocks did not pass:"
    guide = str(run.guide)
    assert f"  FAILED serve at {guide}:5: exit 1: FAILED: server never became ready" in recap
    # the annotations, the step summary and JUnit say the same after the message
    annotations = [line for line in lines if line.startswith("::error ")]
    assert annotations[0].endswith("title=#test-setup serve%3A failed::exit 1: FAILED: server never became ready")
    assert any(line.endswith("::exit 1: the hub refused the token ***") for line in annotations)
    table = summary.read_text(encoding="utf-8")
    assert "| exit 1: RuntimeError: the model is missing |" in table
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    messages = {case.get("name"): failure.get("message") for case in junit.iter("testcase") for failure in case}
    assert messages["#test-setup serve"] == "failed: exit 1: FAILED: server never became ready"
    assert messages["#test-setup unloaded"] == f"failed: exit 7: {reasons['unloaded']}"
    # the secret is in none of them (but the line that asks the runner to mask it too)
    for text in (
        run.stdout.replace(f"::add-mask::{secret}\n", ""),
        table,
        (tmp_path / "junit.xml").read_text(),
        (run.output_dir / "results.json").read_text(),
    ):
        assert secret not in text
    assert re.search(r"^  FAILED leak at .*: exit 1: the hub refused the token \*\*\*$", run.stdout, re.M)


def test_a_mismatch_gives_the_error_line_of_its_stderr_in_every_report(guide_runner, tmp_path: Path) -> None:
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    github = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs)}
    pip_said = "ERROR: Could not find a version that satisfies the requirement specforge==9.9"
    run = guide_runner(
        f"""
        {FENCE}shell #test id="install"
        echo "Looking in indexes: the usual one"
        echo "Collecting specforge==9.9" >&2
        echo "{pip_said}" >&2
        echo "notice: a new release of pip is available" >&2
        {FENCE}

        {FENCE}shell #test-result id="install"
        Looking in indexes: the usual one
        Successfully installed specforge-9.9
        {FENCE}

        {FENCE}shell #test id="chatty"
        echo "Looking in indexes: the usual one"
        echo "Collecting specforge" >&2
        {FENCE}

        {FENCE}shell #test-result id="chatty"
        Successfully installed specforge
        {FENCE}
        """,
        "--keep-going",
        "--junit",
        str(tmp_path / "junit.xml"),
        env={**github, "NO_COLOR": "1"},
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr
    install, chatty = run.block("install"), run.block("chatty")
    assert install["status"] == chatty["status"] == "mismatch"
    assert install["reason"] == pip_said
    assert chatty["reason"] is None  # its stderr says nothing went wrong: the message is all there is
    expected_message = "stdout ends before the expected output's line 2: 'Successfully installed specforge-9.9'"
    assert install["message"] == expected_message
    recap = f"  MISMATCH install at {run.guide}:{install['failure_line']}: {expected_message}: {pip_said}"
    assert recap in run.stdout.splitlines()
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert any(line.endswith(f"::{expected_message}: {pip_said}") for line in annotations), annotations
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    messages = {case.get("name"): failure.get("message") for case in junit.iter("testcase") for failure in case}
    assert messages["install"] == f"mismatch: {expected_message}: {pip_said}"
    assert messages["chatty"] is not None and pip_said not in messages["chatty"]
