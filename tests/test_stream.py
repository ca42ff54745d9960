"""--stream, the live view of a running block: whole characters, all of the output or a note, the log's commands kept."""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci.base.text import Masker, partial_escape_start
from ci.report.console import LIVE_LIMIT_BYTES

FENCE = "```"


def _runner_commands(log: str) -> list[str]:
    """The workflow commands the Actions runner reads in LOG, none inside stop-commands: `::command::` at a line
    start (blanks before it skipped), else the older `##[command]` anywhere in a line."""
    commands = []
    stopped_by: str | None = None
    for line in log.split("\n"):
        if stopped_by is not None:
            if line == f"::{stopped_by}::":
                stopped_by = None
        elif line.startswith("::stop-commands::"):
            stopped_by = line.removeprefix("::stop-commands::")
        elif line.lstrip().startswith("::") or "##[" in line:
            commands.append(line)
    return commands


def test_output_without_a_final_newline_does_not_swallow_the_resume_line(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        printf '100%%'
        {FENCE}

        {FENCE}shell #test-setup
        printf 'half a line on stderr' >&2
        {FENCE}

        {FENCE}shell #test-setup
        printf 'failing'
        exit 3
        {FENCE}
        """,
        "--stream",
        env={"GITHUB_ACTIONS": "true"},
    )
    assert run.returncode == 1, run.stdout
    lines = run.stdout.split("\n")
    token = next(line.removeprefix("::stop-commands::") for line in lines if line.startswith("::stop-commands::"))
    resume = lines.index(f"::{token}::")
    assert re.fullmatch(r"::[0-9a-f]+::", lines[resume])
    assert lines[resume - 1] == "| 100%"
    commands = _runner_commands(run.stdout)
    assert [c.split("[")[0] for c in commands if "group::" in c] == ["::group::", "::endgroup::"] * 3
    assert [c for c in commands if c.startswith("::error ")], run.stdout
    assert "\n! half a line on stderr\n" in run.stdout
    # shown live, not again after in a section (the recap and the annotation quote it, as the reason it failed)
    assert lines.count("| failing") == 1 and "failing" not in lines
    assert lines[-3].endswith(": exit 3: failing")  # the recap, before the verdict


LEGACY_GUIDE = f"""
    {FENCE}shell #test id="goes-on"
    echo a
    echo '##[stop-commands]from-the-block'
    {FENCE}

    {FENCE}shell #test-result id="goes-on"
    a
    {FENCE}

    {FENCE}shell #test-setup id="silent"
    echo '##[error]from the last line'
    sleep 2.5
    {FENCE}
    """


@pytest.mark.parametrize("stream", [False, True])
def test_block_output_quoted_on_a_line_of_the_harness_issues_no_command_of_the_older_form(
    guide_runner, stream: bool
) -> None:
    # the runner reads `##[command]` anywhere in a line: the verdict, the recap and the heartbeat quote the block
    run = guide_runner(
        LEGACY_GUIDE,
        "--keep-going",
        "--heartbeat",
        "1",
        *(["--stream"] if stream else []),
        env={"GITHUB_ACTIONS": "true"},
    )
    assert run.returncode == 1, run.stdout
    log = run.stdout
    assert "'##[stop-commands]from-the-block'" in log  # shown, as it is, in the verdict and the recap
    assert "last line: ##[error]from the last line" in log
    commands = _runner_commands(log)
    assert not [c for c in commands if not c.startswith("::")], log  # an annotation's message is only its text
    assert [c.split(" ")[0] for c in commands if c.startswith("::error ")] == ["::error"], log  # still annotated


def test_a_block_writing_fast_is_shown_whole(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        seq 1 300000
        {FENCE}
        """,
        "--stream",
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert run.block("1")["stdout_bytes"] > 1_900_000
    numbers = [line.removeprefix("| ") for line in run.stdout.split("\n") if line.startswith("| ")]
    assert numbers == [str(n) for n in range(1, 300001)]
    assert "not shown live" not in run.stdout


def test_the_live_view_stops_at_its_limit_says_what_it_left_out_and_never_shows_a_secret_in_part(
    guide_runner,
) -> None:
    token = "hf_straddles_the_limit_42"
    before = 10  # of its characters fall within the limit
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        head -c {LIVE_LIMIT_BYTES - before} /dev/zero | tr '\\0' x
        printf '%s\\n' "$HF_TOKEN"
        echo 'stderr is still shown' >&2
        {FENCE}
        """,
        "--stream",
        env={"HF_TOKEN": token},
    )
    assert run.returncode == 0, run.stdout[-2000:]
    path = run.output_dir / run.block("1")["stdout_path"]
    assert path.stat().st_size == LIVE_LIMIT_BYTES + len(token) + 1 - before  # the file has it all
    lines = run.stdout.split("\n")
    shown = lines.index("| " + "x" * (LIVE_LIMIT_BYTES - before))
    assert (
        lines[shown + 1] == f"[... live view of stdout stopped after its first 8.0 MiB; the whole stream is in {path}]"
    )
    unseen = len(token) + 1 - before
    assert (
        f"[... {unseen} bytes of stdout not shown live, after its first 8.0 MiB; the whole stream is in {path}]"
        in lines
    )
    assert "! stderr is still shown" in lines
    assert token[:before] not in run.stdout


def test_a_character_written_in_two_parts_is_shown_whole(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        printf 'split: \\xe4'
        sleep 0.5  # the live view reads what is written so far in between
        printf '\\xb8\\xad\\n'
        {FENCE}
        """,
        "--stream",
    )
    assert run.returncode == 0, run.stdout
    assert "\n| split: 中\n" in run.stdout
    assert "\ufffd" not in run.stdout


def test_an_escape_sequence_or_crlf_written_in_two_parts_is_cleaned_whole(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        printf 'plain \\x1b[3'
        sleep 0.5
        printf '1mred\\x1b[0m\\r'
        sleep 0.5
        printf '\\nnext\\n'
        {FENCE}
        """,
        "--stream",
    )
    assert run.returncode == 0, run.stdout
    assert "\n| plain red\n| next\n" in run.stdout


def test_a_line_redrawn_by_a_carriage_return_shows_each_state_and_no_empty_line(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        printf '\\rstarting\\n'
        printf 'download:\\n\\r 10%%\\r 50%%'
        sleep 0.5  # the live view reads what is written so far in between
        printf '\\r100%%\\n'
        sleep 0.5
        printf '\\r\\rdone\\r\\n\\nafter an empty line\\n'
        {FENCE}
        """,
        "--stream",
    )
    assert run.returncode == 0, run.stdout
    shown = "| starting\n| download:\n|  10%\n|  50%\n| 100%\n| done\n| \n| after an empty line\n"
    assert f"\n{shown}" in run.stdout, run.stdout


def test_the_end_of_a_line_is_shown_live_while_secrets_are_masked(tmp_path: Path, harness_env: dict[str, str]) -> None:
    flag = tmp_path / "go"
    guide = tmp_path / "g.md"
    guide.write_text(
        f"{FENCE}shell #test-setup\nprintf 'downloading: 50%%'\n"
        f"while [ ! -e {flag} ]; do sleep 0.05; done\necho ' done'\n{FENCE}\n"
    )
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--stream", "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env={**harness_env, "HF_TOKEN": "hf_a_secret_value_of_some_length_1234567890"},
        stdout=subprocess.PIPE,
    )
    assert harness.stdout is not None
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(harness.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 30
        while b"downloading: 50%" not in seen and time.monotonic() < deadline:  # the block waits for the flag
            if selector.select(timeout=1):
                seen += os.read(harness.stdout.fileno(), 1 << 16)
    flag.touch()
    rest, _ = harness.communicate(timeout=60)
    assert b"downloading: 50%" in seen, seen
    assert harness.returncode == 0
    assert b"\n| downloading: 50% done\n" in seen + rest


def _read_until(stdout: int, wanted: bytes, seen: bytes) -> bytes:
    """What the harness has written on STDOUT once WANTED is in it (or after 30 s: the caller's assert says)."""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 30
        while wanted not in seen and time.monotonic() < deadline:
            if selector.select(timeout=1):
                chunk = os.read(stdout, 1 << 16)
                if not chunk:
                    break
                seen += chunk
    return seen


def test_each_streamed_line_is_marked_with_its_stream_and_never_shares_a_line_with_the_other(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    flags = [tmp_path / "err-may-come", tmp_path / "rest-may-come"]
    guide = tmp_path / "g.md"
    guide.write_text(
        f"{FENCE}shell #test-setup\nprintf 'out begun, '\n"
        f"while [ ! -e {flags[0]} ]; do sleep 0.05; done\necho 'an error line' >&2\n"
        f"while [ ! -e {flags[1]} ]; do sleep 0.05; done\necho 'out ended'\necho 'two more' >&2\n{FENCE}\n"
    )
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--stream", "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env=harness_env,
        stdout=subprocess.PIPE,
    )
    assert harness.stdout is not None
    descriptor = harness.stdout.fileno()
    seen = _read_until(descriptor, b"| out begun, ", b"")  # the half line of stdout, shown before the block goes on
    flags[0].touch()
    seen = _read_until(descriptor, b"! an error line\n", seen)
    flags[1].touch()
    rest, _ = harness.communicate(timeout=60)
    assert harness.returncode == 0
    # the stdout line, broken by stderr, goes on under its own mark on a line of its own
    assert b"\n| out begun, \n! an error line\n| out ended\n! two more\n" in seen + rest, seen + rest


def test_a_streamed_failure_shows_its_diff_and_files_but_not_its_output_again(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="drifts"
        echo 'printed once'
        echo 'warned once' >&2
        {FENCE}

        {FENCE}shell #test-result id="drifts"
        printed twice
        {FENCE}
        """,
        "--stream",
    )
    assert run.returncode == 1
    assert run.stdout.count("printed once") == 2  # the live line, and the diff's `+` line
    assert "\n| printed once\n" in run.stdout and "\n+printed once\n" in run.stdout
    assert run.stdout.count("warned once") == 1
    assert "--- actual" not in run.stdout and "--- stderr" not in run.stdout
    block = run.block("drifts")
    assert (
        f"--- output (shown live above)\nstdout: {run.output_dir / block['stdout_path']}\n"
        f"stderr: {run.output_dir / block['stderr_path']}\n"
    ) in run.stdout


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("plain text", "plain text"),
        ("red \x1b", "red "),
        ("red \x1b[3", "red "),
        ("red \x1b[31mred", "red \x1b[31mred"),
        ("title \x1b]0;name", "title "),
        ("title \x1b]0;name\x1b", "title "),
        ("title \x1b]0;name\x07", "title \x1b]0;name\x07"),
        ("line\r", "line"),
        ("line\r\n", "line\r\n"),
        ("8-bit \x9b3", "8-bit "),
        ("never closed \x1b]" + "x" * 300, "never closed \x1b]" + "x" * 300),  # shown as text, not held for ever
    ],
)
def test_the_end_of_a_read_that_may_begin_an_escape_sequence_waits_for_the_next(text: str, complete: str) -> None:
    assert text[: partial_escape_start(text)] == complete


@given(
    secrets=st.lists(st.text("abc", min_size=6, max_size=9), min_size=1, max_size=3),
    text=st.text("abc ", max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=6),
)
@settings(max_examples=300, deadline=None)
def test_text_shown_in_pieces_is_masked_as_the_whole_would_be(secrets: list[str], text: str, cuts: list[int]) -> None:
    masker = Masker(tuple(sorted(set(secrets), key=len, reverse=True)))
    shown, held, start = "", "", 0
    for end in [*sorted(cuts), len(text)]:  # the pieces the live view reads, each shown as soon as it is safe
        piece = held + text[start:end]
        start = max(start, end)
        cut = masker.clear_cut(piece, masker.partial_secret_start(piece))
        shown, held = shown + masker.mask(piece[:cut]), piece[cut:]
    assert shown + masker.mask(held) == masker.mask(text)


# the harness with a bug in showing its first block's sections: after --stream, before the resume line
_BUG_IN_A_REPORT = """
import sys
import ci.report.console
from ci.run import main

original = ci.report.console.block_details
calls = []


def block_details(result, **kwargs):
    calls.append(result)
    if len(calls) == 1:
        raise KeyError("simulated bug in the console")
    return original(result, **kwargs)


ci.report.console.block_details = block_details
sys.exit(main(sys.argv[1:]))
"""


def test_a_report_that_fails_half_way_leaves_no_stop_commands_open(tmp_path: Path, harness_env: dict[str, str]) -> None:
    (tmp_path / "guide.md").write_text(
        f"{FENCE}shell #test-setup\necho one\n{FENCE}\n\n{FENCE}shell #test-setup\necho two\nexit 3\n{FENCE}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", _BUG_IN_A_REPORT, "guide.md", "--stream", "--keep-going", "--output-dir", "out"],
        cwd=tmp_path,
        env={**harness_env, "GITHUB_ACTIONS": "true"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "simulated bug in the console" in done.stderr
    commands = _runner_commands(done.stdout)
    # the runner still reads the second block's fold and the run's annotation
    assert [c.split("[")[0] for c in commands if "group::" in c] == ["::group::", "::group::", "::endgroup::"], (
        done.stdout
    )
    assert [c for c in commands if c.startswith("::error ")], done.stdout


def test_a_file_name_a_block_made_is_listed_on_one_line_issuing_no_command(guide_runner, tmp_path: Path) -> None:
    made = tmp_path / "made"
    run = guide_runner(
        f"""
        ---
        ci:
          collect:
            - {made}/*
            - "::warning::no-such-file*"
        ---
        {FENCE}shell #test-setup
        mkdir -p {made}
        touch '{made}/a
        ::error::from-a-file-name'
        {FENCE}
        """,
        env={"GITHUB_ACTIONS": "true"},
    )
    assert run.returncode == 0, run.stdout
    assert f"\n  {made}/a\\n::error::from-a-file-name (0 B)\n" in run.stdout
    assert "  ::warning::no-such-file*: matched no file" in run.stdout
    assert not [c for c in _runner_commands(run.stdout) if "error::" in c or "warning::" in c], run.stdout


def test_guide_text_quoted_in_warnings_and_document_errors_issues_no_command_under_actions(guide_runner) -> None:
    # in a pull request's check the guide is its author's: what the harness quotes of it is not read as a command
    guide = (
        f"{FENCE}shell #test-setup timeout='##[error]from-a-parameter'\necho ok\n{FENCE}\n\n"
        f"{FENCE}shell #test-result id='##[add-mask]orphan'\nx\n{FENCE}\n"
    )
    run = guide_runner(guide, "--list", env={"GITHUB_ACTIONS": "true"})
    assert run.returncode == 2, run.stdout + run.stderr
    assert "bad duration '##[error]from-a-parameter'" in run.stderr
    # the annotations are on stderr too, beside the lines they repeat
    commands = _runner_commands(run.stderr)
    assert commands and all(c.startswith(("::error ", "::warning ")) for c in commands), run.stderr
