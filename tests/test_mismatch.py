"""Mismatch reports through the command line: bytes a log hides are shown where they differ, and a mismatch in a
large output is blamed on the right line of the guide, in the console, results.json, JUnit and annotations."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

FENCE = "```"


def _greet(printed: str, expected: str) -> str:
    """A #test id=greet running `printf 'PRINTED'`, and its #test-result expecting EXPECTED."""
    test = f"{FENCE}shell #test id=\"greet\"\nprintf '{printed}'\n{FENCE}\n\n"
    return test + f'{FENCE}shell #test-result id="greet"\n{expected}\n{FENCE}\n'


@pytest.mark.parametrize(
    ("printed", "diff_line", "named"),
    [
        ("hello\\r\\n", "+hello\\r", "\\r (carriage return)"),
        (
            "\\033[31mhello\\033[0m\\n",
            "+\\x1b[31mhello\\x1b[0m",
            "\\x1b[31m (escape sequence), \\x1b[0m (escape sequence)",
        ),
        ("hel\\0lo\\n", "+hel\\x00lo", "\\x00 (NUL)"),
    ],
    ids=["carriage return", "colour", "NUL"],
)
def test_a_mismatch_in_bytes_a_log_hides_is_shown(guide_runner, printed: str, diff_line: str, named: str) -> None:
    run = guide_runner(_greet(printed, "hello"))
    assert run.returncode == 1, run.stdout
    block = run.block("greet")
    assert (block["status"], block["first_unmatched_line"]) == ("mismatch", 1)
    # the diff shows the difference, escaped, where the actual output shows the line as the log does: `hello`
    assert f"\n-hello\n{diff_line}\n" in run.stdout, run.stdout
    said = f"from its line 1: 'hello'; the output's line there, '{diff_line[1:]}',"  # quoted as Python does
    assert said in block["message"], block["message"]
    assert f"differs from it only in what a log does not show: {named}" in block["message"]
    assert said in run.stdout  # the verdict's line


def test_a_line_differing_only_in_blanks_says_so_and_the_diff_shows_them(guide_runner) -> None:
    run = guide_runner(_greet("hello \\nworld\\n", "hello\nworld"))
    assert run.returncode == 1, run.stdout
    assert "\n-hello\n+hello\\x20\n world\n" in run.stdout, run.stdout  # the two lines look alike no more
    said = "from its line 1: 'hello'; the output's line there, 'hello ', differs from it only in blanks (spaces, tabs)"
    assert said in run.block("greet")["message"]
    assert said in run.stdout


def test_a_visible_difference_says_nothing_of_hidden_bytes(guide_runner) -> None:
    run = guide_runner(_greet("hullo\\r\\n", "hello"))
    block = run.block("greet")
    assert block["message"] == "stdout does not match the expected output from its line 1: 'hello'"
    assert "\n-hello\n+hullo\\r\n" in run.stdout, run.stdout


def test_a_quoted_line_keeps_its_secret_masked(guide_runner) -> None:
    """Quoting a line escapes the backslash in a secret: it is masked before, or the log would show it."""
    secret = "pa\\ss-word-42"
    run = guide_runner(
        f"""
        {FENCE}shell #test id="secret"
        printf '%s\\r\\n' "$MY_TOKEN"
        {FENCE}

        {FENCE}shell #test-result id="secret"
        {secret}
        {FENCE}
        """,
        env={"MY_TOKEN": secret},
    )
    block = run.block("secret")
    assert block["message"].startswith("stdout does not match the expected output from its line 1: '***';")
    assert "the output's line there, '***\\r'," in block["message"]
    assert "ss-word" not in run.stdout and "ss-word" not in (run.output_dir / "results.json").read_text()


def test_a_secret_an_escape_sequence_cuts_in_two_stays_masked_where_hidden_bytes_are_written_out(guide_runner) -> None:
    """`grep --color` highlights part of a token: the log drops the escapes and masks it, and so must the diff and
    the quoted line, which write the escapes out."""
    secret = "hf_abcdefghijklmnopqrstuvwxyz"
    run = guide_runner(
        f"""
        {FENCE}shell #test id="extra"
        echo a
        printf 'token: %s\\033[01;31m%s\\033[m%s\\n' "${{HF_TOKEN:0:5}}" "${{HF_TOKEN:5:5}}" "${{HF_TOKEN:10}}"
        {FENCE}

        {FENCE}shell #test-result id="extra"
        a
        {FENCE}

        {FENCE}shell #test id="differs"
        printf 'token: %s\\033[01;31m%s\\033[m%s\\n' "${{HF_TOKEN:0:5}}" "${{HF_TOKEN:5:5}}" "${{HF_TOKEN:10}}"
        {FENCE}

        {FENCE}shell #test-result id="differs"
        token: none
        {FENCE}
        """,
        "--keep-going",
        env={"HF_TOKEN": secret},
    )
    assert run.returncode == 1, run.stdout
    assert "\n+token: ***\n" in run.stdout, run.stdout  # in both diffs
    assert run.block("extra")["message"].endswith("(its line 1, 'a'): 'token: ***'")
    for report in (run.stdout, (run.output_dir / "results.json").read_text()):
        assert secret[10:20] not in report and secret[5:10] not in report, report


def test_a_large_output_is_blamed_on_the_line_that_differs(guide_runner, tmp_path: Path) -> None:
    """60,000 lines (more than the 256 KiB view) that differ only in the last: the result's last line is to blame."""
    middle = [str(number) for number in range(30_000, 60_000)]
    body = ["1", "2", "...", *middle, "60001"]
    lines = [
        "# Counting",
        "",
        f'{FENCE}shell #test id="count"',
        "seq 60000",
        FENCE,
        "",
        f'{FENCE}shell #test-result id="count"',
        *body,
        FENCE,
        "",
        "The end.",
    ]
    last_line = lines.index("60001") + 1
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)}
    run = guide_runner("\n".join(lines) + "\n", "--junit", str(tmp_path / "junit.xml"), env=env)
    assert run.returncode == 1, run.stdout[-3000:]
    block = run.block("count")
    said = f"from its line {len(body)}: '60001'"
    assert block["status"] == "mismatch" and block["first_unmatched_line"] == len(body)
    assert said in block["message"]
    assert f"--- first failing expected line, {run.guide}:{last_line} (line {len(body)} " in run.stdout
    verdict = next(line for line in run.stdout.splitlines() if line.startswith("[ERROR] [1/1]"))
    assert said in verdict and verdict.endswith(f"({run.guide}:{last_line})")
    assert block["failure_line"] == last_line
    case = ET.parse(tmp_path / "junit.xml").find(".//testcase")
    failure = ET.parse(tmp_path / "junit.xml").find(".//failure")
    assert case is not None and case.get("line") == str(last_line)
    assert failure is not None and said in failure.get("message", "")
    annotation = next(line for line in run.stdout.splitlines() if line.startswith("::error "))
    assert annotation.startswith(f"::error file=guide.md,line={last_line},"), annotation
    assert last_line <= len(run.guide.read_text().splitlines())


def test_a_mismatch_in_a_loaded_value_points_at_its_placeholder(guide_runner, tmp_path: Path) -> None:
    """A value spanning lines: the annotation points at the `<L>` line of the result as written, not past it."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="LINES"
        printf 'one\\ntwo\\nthree\\n'
        {FENCE}

        {FENCE}shell #test id="count"
        printf 'one\\ntwo\\nTHREE\\nend\\n'
        {FENCE}

        {FENCE}shell #test-result id="count" load="LINES>>L"
        <L>
        end
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)},
    )
    block = run.block("count")
    assert block["first_unmatched_line"] == 3  # of the body as matched: one, two, three, end
    assert "from its line 3: 'three'" in block["message"]
    placeholder_line = run.guide.read_text().splitlines().index("<L>") + 1
    annotation = next(line for line in run.stdout.splitlines() if line.startswith("::error "))
    assert annotation.startswith(f"::error file=guide.md,line={placeholder_line},"), annotation


GOLDEN = Path(__file__).parent / "golden"


def _run_golden_guide(
    run_harness: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    shutil.copy(GOLDEN / "mismatch-guide.md", tmp_path / "mismatch-guide.md")
    return run_harness("mismatch-guide.md", "--output-dir", "out", "--keep-going", *extra, env=env, timeout_s=120)


def _normalised(text: str, tmp_path: Path) -> str:
    """What changes from run to run: paths, durations, the stop-commands token."""
    text = text.replace(str(tmp_path), "TMP")
    text = re.sub(r"\d+\.\d+s", "N.NNs", text)
    return re.sub(r"[0-9a-f]{32}", "TOKEN", text)


def test_a_mismatch_view_leads_with_the_difference(tmp_path: Path, run_harness) -> None:
    """The first failing line and its guide line, the hunk, then both sides bounded with their files: golden."""
    done = _run_golden_guide(run_harness, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    log = _normalised(done.stdout, tmp_path)
    golden = GOLDEN / "mismatch-console.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(log, encoding="utf-8")
    assert log == golden.read_text(encoding="utf-8"), f"{golden} differs (rerun with UPDATE_GOLDEN=1, review the diff)"
    # one wrong character in 300 lines: a short log, the difference first
    long_block = log[log.index("==> [1/4]") : log.index("==> [2/4]")].splitlines()
    assert len(long_block) < 60, "\n".join(long_block)
    titles = [line for line in long_block if line.startswith("--- ")]
    assert [title.split(" (")[0].split(",")[0] for title in titles] == [
        "--- first failing expected line",
        "--- diff",
        "--- expected",
        "--- actual",
    ]
    assert long_block.index("-line 15O") < long_block.index(titles[2])


def test_a_run_failing_on_one_character_in_300_lines_is_a_short_log_that_ends_naming_it(
    tmp_path: Path, run_harness
) -> None:
    """The whole job log of that run, as a person reads it: under 80 lines, the block and its guide line last."""
    done = _run_golden_guide(run_harness, tmp_path, "--only", "long")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) < 80, done.stdout
    line = _guide_line(tmp_path / "mismatch-guide.md", "line 15O", '```shell #test-result id="long"')
    assert lines[-3:-1] == [
        "1 block did not pass:",
        f"  MISMATCH long at mismatch-guide.md:{line}: stdout does not match the expected output from its line 150:"
        " 'line 15O'",
    ]
    assert lines[-1].startswith("[ERROR] === mismatch-guide.md: FAILED (")


def _guide_line(guide: Path, text: str, after: str) -> int:
    """The line of the guide holding TEXT, the first after the line holding AFTER."""
    lines = guide.read_text(encoding="utf-8").splitlines()
    return lines.index(text, lines.index(after)) + 1


@pytest.mark.parametrize(
    ("block", "blamed", "said"),
    [
        ("long", "line 15O", "stdout does not match the expected output from its line 150: 'line 15O'"),
        ("wildcard", "z-wrong", "stdout does not match the expected output from its line 3: 'z-wrong'"),
        ("short", "c", "stdout ends before the expected output's line 3: 'c'"),
        ("goes-on", "b", "stdout goes on after the last expected line (its line 2, 'b'): 'c' (and 2 more lines)"),
    ],
)
def test_every_report_names_the_same_line(tmp_path: Path, run_harness, block: str, blamed: str, said: str) -> None:
    """The console's verdict, JUnit, results.json and the annotation name the expected line to blame, as written."""
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)}
    done = _run_golden_guide(run_harness, tmp_path, "--junit", "junit.xml", **env)
    assert done.returncode == 1, done.stdout + done.stderr
    guide = tmp_path / "mismatch-guide.md"
    line = _guide_line(guide, blamed, f'```shell #test-result id="{block}"')
    record = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    result = next(entry for entry in record["blocks"] if entry["id"] == block)
    assert (result["failure_line"], result["message"]) == (line, said)
    verdict = next(text for text in done.stdout.splitlines() if text.startswith("[ERROR] [") and f"] {block}:" in text)
    assert verdict.endswith(f"{said} (mismatch-guide.md:{line})"), verdict
    case = ET.parse(tmp_path / "junit.xml").find(f".//testcase[@name='{block}']")
    assert case is not None and case.get("line") == str(line)
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == f"mismatch: {said}"
    assert f"--- first failing expected line, mismatch-guide.md:{line} " in (failure.text or "")
    annotation = f"::error file=mismatch-guide.md,line={line},title=#test {block}%3A mismatch::"
    assert any(text.startswith(annotation) for text in done.stdout.splitlines()), done.stdout


def test_an_empty_expected_output_is_said_to_be_empty(guide_runner) -> None:
    run = guide_runner(
        f'{FENCE}shell #test id="quiet"\necho noisy\n{FENCE}\n\n{FENCE}shell #test-result id="quiet"\n{FENCE}\n'
    )
    assert run.returncode == 1, run.stdout
    assert "\n--- expected (empty: no output)\n" in run.stdout
    assert (
        "\n--- diff (- expected, + actual; lines a wildcard matched folded)\n@@ -1,1 +1,1 @@\n-\n+noisy\n" in run.stdout
    )
