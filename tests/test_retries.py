"""Retries (`retry=`, `ci.retry`): what is run again and what never is, every attempt's files, and how reports say it.

Real harnesses on tiny guides: a counter file in the working directory makes
a block fail on its first attempt and pass on the next.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from waiting import wait_for

from ci.guide.model import DocumentError
from ci.guide.parse import parse_guide
from ci.guide.plan import build_plan
from ci.guide.settings import DEFAULT_RETRY_DELAY_S

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "docs" / "results.schema.json").read_text(encoding="utf-8"))
FENCE = "```"


def _counted(name: str) -> str:
    """Shell that counts its runs in the file NAME and leaves N, the runs before this one, in $n."""
    return f"n=$(cat {name} 2>/dev/null || echo 0); echo $((n+1)) > {name}"


# Under Actions, with --keep-going: a block that passes on its second attempt, one that fails on each, one that
# mismatches (never retried), one whose retry="0" overrides the front matter, one that times out then passes,
# and one whose failed attempt leaves a server running, which is ended before the next attempt.
RETRIED = f"""\
---
ci:
  retry: 1
  retry_delay: 0
---
# Retries

{FENCE}bash #test-setup id="flaky" retry="2"
{_counted("c")}; echo "try $n"; echo "oops $n" >&2; [ "$n" -ge 1 ]
{FENCE}

{FENCE}bash #test-setup id="broken"
{_counted("b")}; echo "no network" >&2; exit 3
{FENCE}

{FENCE}bash #test id="drift"
{_counted("d")}; echo "v$n"
{FENCE}

{FENCE}text #test-result id="drift"
v9
{FENCE}

{FENCE}bash #test-setup id="once" retry="0"
{_counted("e")}; exit 1
{FENCE}

{FENCE}python #test-setup id="slow" timeout="5"
import pathlib, time
count = pathlib.Path("s")
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
def waiting_for_the_mirror():
    time.sleep(30)
if n == 0:
    waiting_for_the_mirror()
{FENCE}

{FENCE}bash #test-setup id="server"
{_counted("p")}
if [ -f server.pid ] && kill -0 "$(cat server.pid)" 2>/dev/null; then echo "the first server still runs" >&2; exit 9; fi
sleep 300 &
echo $! > server.pid
sleep 301 &
[ "$n" -ge 1 ]
{FENCE}
"""


def test_failed_and_timed_out_blocks_run_again_and_every_report_says_so(tmp_path: Path, run_harness) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(RETRIED, encoding="utf-8")
    summary, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "NO_COLOR": "1"}
    out = tmp_path / "out"
    done = run_harness(str(guide), "--output-dir", str(out), "--junit", str(junit), "--keep-going", env=env)
    log = done.stdout
    assert done.returncode == 1, log + done.stderr
    runs = {name: int((tmp_path / name).read_text()) for name in ("c", "b", "d", "e", "s", "p")}
    # flaky, broken (ci.retry: 1) and slow ran again; the mismatch and retry="0" did not
    assert runs == {"c": 2, "b": 2, "d": 1, "e": 1, "s": 2, "p": 2}

    assert "[1/6] flaky: attempt 1 of 3 failed (exit 1); retrying now" in log
    assert "[1/6] flaky: PASSED on attempt 2 of 3 in" in log
    assert "[5/6] slow: attempt 1 of 2 timed out (timed out after 5s" in log
    assert "[5/6] slow: PASSED on attempt 2 of 2" in log
    assert "[2/6] broken: FAILED on attempt 2 of 2" in log
    assert "attempt 2 of" not in log.split("[3/6] drift")[1].split("[4/6]")[0]  # a mismatch runs once

    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(record)) == []
    blocks = {block["id"]: block for block in record["blocks"]}
    assert {name: block["status"] for name, block in blocks.items()} == {
        "flaky": "passed",
        "broken": "failed",
        "drift": "mismatch",
        "once": "failed",
        "slow": "passed",
        "server": "passed",
    }
    assert {name: (block["retry"], block["retry_delay_s"]) for name, block in blocks.items()} == {
        "flaky": (2, 0),
        "broken": (1, 0),
        "drift": (1, 0),
        "once": (0, 0),
        "slow": (1, 0),
        "server": (1, 0),
    }
    (first,) = blocks["flaky"]["attempts"]
    assert (first["attempt"], first["status"], first["exit_code"]) == (1, "failed", 1)
    # each attempt's output on disk: the earlier one's under its attempt-1 name, the last under the usual one
    assert (out / first["stdout_path"]).read_text() == "try 0\n"
    assert (out / first["stderr_path"]).read_text() == "oops 0\n"
    assert first["stdout_path"].endswith(".attempt-1.stdout.txt")
    assert (out / blocks["flaky"]["stdout_path"]).read_text() == "try 1\n"
    assert ".attempt-" not in blocks["flaky"]["stdout_path"]
    (timed_out,) = blocks["slow"]["attempts"]
    assert timed_out["status"] == "timed_out"
    # its stack dump is kept with it, out of the next attempt's way, and the log and the record say where
    dumps = [out / path for path in timed_out["stack_dumps"]]
    assert dumps and all(".attempt-1.dumps/" in str(path) for path in dumps), timed_out
    assert "waiting_for_the_mirror" in dumps[0].read_text(encoding="utf-8")
    assert f"{Path(timed_out['stack_dumps'][0]).parent}/" in log.split("[5/6] slow: attempt 1 of 2")[1].split("\n")[0]
    assert blocks["slow"]["stack_dumps"] == []
    assert [a["message"] for a in blocks["broken"]["attempts"]] == ["exit 3"]
    assert blocks["drift"]["attempts"] == [] and blocks["once"]["attempts"] == []
    # the server the failed attempt left running was ended before the next attempt, which found it gone
    (server_attempt,) = blocks["server"]["attempts"]
    assert len(server_attempt["processes_ended"]) == 2  # the background sleeps, SIGTERMed
    assert "[6/6] server: attempt 1 of 2 failed (exit 1); retrying now; 2 processes it left running ended" in log

    cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    flaky = cases["#test-setup flaky"]
    assert flaky.find("failure") is None
    (flaky_failure,) = flaky.findall("flakyFailure")
    assert flaky_failure.get("type") == "failed" and flaky_failure.get("message") == "failed: exit 1"
    assert flaky_failure.findtext("system-out", "").strip() == "try 0"
    assert flaky_failure.findtext("system-err", "").strip() == "oops 0"
    assert "attempt-1.stdout.txt" in flaky_failure.findtext("stackTrace", "")
    assert [f.get("type") for f in cases["#test-setup slow"].findall("flakyFailure")] == ["timed_out"]
    broken = cases["#test-setup broken"]
    assert broken.find("failure") is not None and broken.findall("flakyFailure") == []
    assert [f.get("message") for f in broken.findall("rerunFailure")] == ["failed: exit 3"]
    assert cases["drift"].findall("rerunFailure") == []

    shown = summary.read_text(encoding="utf-8")
    flaky_section = shown.split("Flaky blocks")[1].split("```mermaid")[0]
    assert "flaky" in flaky_section and "passed on attempt 2 of 3" in flaky_section and "slow" in flaky_section
    assert "broken" not in flaky_section
    annotation = next(line for line in log.splitlines() if line.startswith("::error") and "broken" in line)
    assert annotation.endswith("exit 3: no network (attempt 2 of 2; earlier: exit 3)")


def test_a_stop_signal_during_the_pause_before_a_retry_ends_the_run_at_once(tmp_path: Path, harness_env) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(f'{FENCE}bash #test-setup id="fetch" retry="3" retry_delay="10m"\necho fetched; exit 1\n{FENCE}\n')
    stdout = tmp_path / "stdout.txt"
    out = tmp_path / "out"
    with open(stdout, "wb") as log:
        harness = subprocess.Popen(
            [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(out)],
            cwd=tmp_path,
            env=harness_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_for(lambda: "retrying in 10m" in stdout.read_text(), "the line saying a retry follows")
        harness.send_signal(signal.SIGTERM)
        assert harness.wait(timeout=60) == 128 + signal.SIGTERM, stdout.read_text()
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    (block,) = json.loads((out / "results.json").read_text(encoding="utf-8"))["blocks"]
    assert block["status"] == "failed" and block["attempts"] == []
    assert block["message"] == "exit 1; interrupted by SIGTERM before attempt 2 of 4"
    assert (out / block["stdout_path"]).read_text() == "fetched\n"  # the last attempt's files keep their names
    assert "INTERRUPTED" in stdout.read_text()


def test_a_retry_whose_pause_would_pass_the_deadline_is_not_started(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}bash #test-setup id="fetch" retry="1" retry_delay="10m"
        echo fetched; exit 1
        {FENCE}
        """,
        "--deadline",
        "5m",
    )
    assert run.returncode == 1, run.stdout + run.stderr
    block = run.block("fetch")
    assert block["attempts"] == []
    assert block["message"] == "exit 1; no attempt 2 of 2: the run deadline comes before it could start"


def _plan(text: str):  # type: ignore[no-untyped-def]
    return build_plan(parse_guide(textwrap.dedent(text).lstrip("\n"), "guide.md"))


def test_the_front_matter_gives_every_block_its_retries_unless_the_block_says_otherwise() -> None:
    plan = _plan(
        f"""
        ---
        ci:
          retry: 2
          retry_delay: 30s
        ---
        {FENCE}bash #test-setup
        true
        {FENCE}
        {FENCE}bash #test-setup retry="0"
        true
        {FENCE}
        {FENCE}bash #test-setup retry_delay="1m"
        true
        {FENCE}
        """
    )
    assert [(step.retry, step.retry_delay_s) for step in plan.steps] == [(2, 30.0), (0, 30.0), (2, 60.0)]
    assert plan.warnings == ()
    alone = _plan(f'{FENCE}bash #test-setup retry="1"\ntrue\n{FENCE}\n{FENCE}bash #test-setup\ntrue\n{FENCE}\n')
    assert [(step.retry, step.retry_delay_s) for step in alone.steps] == [(1, DEFAULT_RETRY_DELAY_S), (0, 10.0)]


@pytest.mark.parametrize(
    ("guide", "problem"),
    [
        (
            f'{FENCE}bash #test-setup retry="two"\ntrue\n{FENCE}\n',
            "guide.md:1: retry: bad number of retries 'two': give a whole number from 0 to 10, e.g. 2",
        ),
        (
            f'{FENCE}bash #test-setup retry="11"\ntrue\n{FENCE}\n',
            "guide.md:1: retry: '11' retries is over the maximum of 10",
        ),
        (
            f'{FENCE}bash #test-setup retry="1" retry_delay="soon"\ntrue\n{FENCE}\n',
            "guide.md:1: retry_delay: bad duration 'soon': use seconds (90) or a unit: 30s, 10m, 3h",
        ),
        (
            f'{FENCE}bash #test-setup retry="1" retry_delay="2h"\ntrue\n{FENCE}\n',
            "guide.md:1: retry_delay: retry delay '2h' is over the maximum of an hour: give at most 60m",
        ),
        (
            f'{FENCE}bash #test id="a"\necho a\n{FENCE}\n{FENCE}text #test-result id="a" retry="2"\na\n{FENCE}\n',
            "guide.md:4: 'retry' is not allowed on #test-result; allowed: disable_fuzzy, fuzzy, id, load",
        ),
        (
            f'{FENCE}bash #test-setup retyr="2"\ntrue\n{FENCE}\n',
            "guide.md:1: unknown parameter 'retyr' on #test-setup; did you mean retry=\"2\"?",
        ),
        (
            f"---\nci:\n  retry: many\n---\n{FENCE}bash #test-setup\ntrue\n{FENCE}\n",
            "guide.md:3: front matter ci.retry: bad number of retries 'many'",
        ),
        (
            f"---\nci:\n  retry: 1\n  retry_delay: -5\n---\n{FENCE}bash #test-setup\ntrue\n{FENCE}\n",
            "guide.md:4: front matter ci.retry_delay: bad duration '-5'",
        ),
    ],
    ids=["word", "over-max", "bad-delay", "long-delay", "on-result", "typo", "front-matter", "front-matter-delay"],
)
def test_a_bad_retry_is_a_document_error_naming_the_line_and_the_fix(guide: str, problem: str) -> None:
    with pytest.raises(DocumentError) as caught:
        _plan(guide)
    assert len(caught.value.problems) == 1
    assert str(caught.value.problems[0]).startswith(problem)


def test_a_retry_delay_without_retries_is_a_warning() -> None:
    plan = _plan(f'{FENCE}bash #test-setup retry_delay="5s"\ntrue\n{FENCE}\n')
    assert [str(w) for w in plan.warnings] == [
        'guide.md:1: retry_delay= on this #test-setup has no effect: it is retried only with retry="N"'
        " (or ci.retry); add one, or remove retry_delay="
    ]


def test_list_shows_each_blocks_retries(
    tmp_path: Path, run_harness: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(f'{FENCE}bash #test-setup id="pip" retry="2" retry_delay="30s"\ntrue\n{FENCE}\n')
    text = run_harness(str(guide), "--list")
    assert text.returncode == 0, text.stderr
    assert "retry=2 retry_delay=30s" in text.stdout
    listed = run_harness(str(guide), "--list", "--format", "json")
    (entry,) = json.loads(listed.stdout)
    assert (entry["retry"], entry["retry_delay_s"]) == (2, 30.0)
    assert os.path.basename(entry["guide"]) == "guide.md"


def test_stream_shows_each_attempts_output_in_its_place(guide_runner) -> None:  # type: ignore[no-untyped-def]
    run = guide_runner(
        f"""
        {FENCE}bash #test-setup id="fetch" retry="1" retry_delay="0"
        {_counted("c")}; echo "try $n"; [ "$n" -ge 1 ]
        {FENCE}
        """,
        "--stream",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    retry = next(index for index, line in enumerate(lines) if "attempt 1 of 2 failed (exit 1); retrying now" in line)
    assert "| try 0" in lines[:retry] and "| try 1" in lines[retry:]
    assert "| try 0" not in lines[retry:]


# The first attempt prints nothing at all and fails; the second prints "ready". Then a block after it.
SILENT_THEN_READY = f'{_counted("c")}; [ "$n" -ge 1 ] || exit 1; echo ready'


@pytest.mark.parametrize(
    ("guide", "args"),
    [
        pytest.param(
            f'{FENCE}bash #test id="up" retry="1" retry_delay="0"\n{SILENT_THEN_READY}\n{FENCE}\n\n'
            f'{FENCE}text #test-result id="up"\nready\n{FENCE}\n\n'
            f'{FENCE}bash #test-setup id="after"\necho after\n{FENCE}\n',
            (),
            id="test",
        ),
        pytest.param(
            f'{FENCE}bash #test-setup store="state" retry="1" retry_delay="0"\n{SILENT_THEN_READY}\n{FENCE}\n\n'
            f'{FENCE}bash #test id="after" load="state>>S"\necho "<S>"\n{FENCE}\n\n'
            f'{FENCE}text #test-result id="after"\nready\n{FENCE}\n',
            (),
            id="store",
        ),
        pytest.param(
            "---\nci:\n  retry: 1\n  retry_delay: 0s\n---\n# T\n\n"
            f"{FENCE}shell\n{SILENT_THEN_READY}\n{FENCE}\n\n{FENCE}text\nready\n{FENCE}\n\n"
            f"{FENCE}shell\necho after\n{FENCE}\n",
            ("--dialect", "fences"),
            id="fences",
        ),
    ],
)
def test_an_attempt_that_printed_nothing_leaves_the_next_ones_stdout_in_the_stdout_file(
    guide_runner: Callable[..., Any], guide: str, args: tuple[str, ...]
) -> None:
    run = guide_runner(guide, *args)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "internal error" not in run.stdout + run.stderr
    first, after = run.blocks
    assert (first["status"], len(first["attempts"]), after["status"]) == ("passed", 1, "passed")
    assert (run.output_dir / first["stdout_path"]).read_text(encoding="utf-8") == "ready\n"
    assert first["stderr_path"] is None  # nothing went to stderr
    (attempt,) = first["attempts"]
    assert (attempt["stdout_path"], attempt["stderr_path"]) == (None, None)  # it printed nothing


def test_the_pause_before_a_retry_is_not_said_to_be_the_block_running(guide_runner) -> None:
    # the retry line says the pause; a heartbeat during it would say the block runs with no output yet
    run = guide_runner(
        f"""
        {FENCE}bash #test-setup id="fetch" retry="1" retry_delay="3"
        {_counted("c")}; [ "$n" -ge 1 ] || exit 1; echo second; sleep 2.5
        {FENCE}
        """,
        "--heartbeat",
        "1",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    beats = [line for line in run.stdout.splitlines() if line.startswith("... still running")]
    assert beats, run.stdout
    assert all(
        re.fullmatch(r"\.\.\. still running fetch: [12]\.\ds, stdout 7 B, stderr 0 B, last line: second", line)
        for line in beats
    ), run.stdout
