"""The job log a person reads: quiet passing blocks, the recap at the end, colour, the heartbeat of a long block."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci.report.colour import colour_wanted

FENCE = "```"
GREEN_PASSED = "\x1b[32mPASSED\x1b[0m"


def _blocks(count: int) -> str:
    return "\n".join(_setup(f"b{n}", f"echo {n}") for n in range(1, count + 1))


def _setup(ident: str, *body: str) -> str:
    return f'{FENCE}shell #test-setup id="{ident}"\n' + "\n".join(body) + f"\n{FENCE}\n"


def _log(run) -> str:  # type: ignore[no-untyped-def]
    """The run's log with the guide's directory left out of its paths."""
    return run.stdout.replace(f"{run.guide.parent}/", "")


def _line_of(guide: str, text: str) -> int:
    return guide.splitlines().index(text) + 1


# --- passing blocks are quiet


def test_a_green_run_is_one_line_per_block_and_a_few_more(guide_runner) -> None:
    run = guide_runner(_blocks(6))
    assert run.returncode == 0, _log(run)
    lines = _log(run).splitlines()
    assert len(lines) == 6 + 3, _log(run)  # the guide's header, a line per block, the outputs, the verdict
    assert lines[0] == "=== guide.md: 6 blocks"
    assert re.fullmatch(
        r"==> \[1/6\] #test-setup id=b1 at guide\.md:1 -> PASSED in \d+\.\d\ds \(exit 0, stdout 2 B, stderr 0 B\)",
        lines[1],
    )
    assert lines[-2] == "full block outputs: out"
    assert re.fullmatch(r"=== guide\.md: PASSED \(6 blocks: 6 passed\) in \d+\.\ds", lines[-1])


def test_verbose_shows_what_every_block_printed_and_stored(guide_runner) -> None:
    guide = f"""
        {FENCE}shell #test-setup store="who"
        echo world
        {FENCE}

        {FENCE}shell #test id="greet"
        echo hello
        {FENCE}

        {FENCE}shell #test-result id="greet"
        hello
        {FENCE}
        """
    quiet, verbose = guide_runner(guide), guide_runner(guide, "--verbose")
    assert quiet.returncode == verbose.returncode == 0
    for section in ("--- stored who (5 bytes)\nworld\n", "--- expected\nhello\n--- actual\nhello\n"):
        assert section not in _log(quiet)
        assert section in _log(verbose)
    assert "[1/2] who: PASSED in " in _log(verbose)  # the verdict on its own line, after the sections
    assert guide_runner(guide, "-v").stdout.count("--- ") == _log(verbose).count("--- ") == 3


def test_under_actions_a_passing_blocks_group_holds_what_it_printed(guide_runner, tmp_path: Path) -> None:
    """A green night's log: opening the group of `npu-smi info` shows what it printed (contract section 7)."""
    guide = f"""
        {FENCE}shell #test-setup id="npu"
        echo 'NPU 0 healthy'
        echo 'driver 24.1' >&2
        {FENCE}
        """
    terminal = guide_runner(guide)
    assert terminal.returncode == 0
    assert "NPU 0 healthy" not in terminal.stdout
    assert len(_log(terminal).splitlines()) == 1 + 3  # one line for the block, as before
    actions = guide_runner(guide, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
    assert actions.returncode == 0
    group = _log(actions).split("::group::", 1)[1].split("::endgroup::")[0]
    token = re.search(r"::stop-commands::(\w+)", group)
    assert token is not None, group  # copied output is wrapped: it cannot issue workflow commands
    assert f"--- stdout (14 B)\n::stop-commands::{token[1]}\nNPU 0 healthy\n::{token[1]}::\n" in group
    assert "--- stderr (12 B)\n" in group and "driver 24.1\n" in group
    assert f"[1/1] npu: {GREEN_PASSED} in " in _log(actions).split("::endgroup::")[1]


def test_a_passing_block_with_an_error_marker_still_shows_its_stderr(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        echo done
        echo '[ERROR] disk almost full' >&2
        {FENCE}
        """
    )
    assert run.returncode == 0
    assert (
        "--- stderr (25 B, contains '[ERROR]')\n[ERROR] disk almost full\n--- stdout (5 B)\ndone\n[1/1] #1: PASSED in "
        in _log(run)
    )


def test_a_passing_block_whose_stdout_is_blank_shows_its_stderr(guide_runner) -> None:
    """As the reference engine: a block that said something on stderr alone shows it, blank lines on stdout or none."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup id="silent"
        echo 'the cache is cold: downloading 2 GB' >&2
        {FENCE}

        {FENCE}shell #test-setup id="blank"
        printf '\\n  \\n'
        echo 'using the CPU: no NPU found' >&2
        {FENCE}

        {FENCE}shell #test-setup id="quiet"
        echo done
        echo 'some progress' >&2
        {FENCE}

        {FENCE}shell #test-setup id="nothing"
        printf '\\n'
        printf '\\n\\n' >&2
        {FENCE}
        """
    )
    assert run.returncode == 0, _log(run)
    log = _log(run)
    assert "--- stderr (36 B)\nthe cache is cold: downloading 2 GB\n[1/4] silent: PASSED in " in log
    assert "--- stderr (28 B)\nusing the CPU: no NPU found\n" in log and "[2/4] blank: PASSED in " in log
    # stdout said something, and stderr only blank lines: one line each, as any passing block
    assert "some progress" not in log
    assert re.search(r"^==> \[3/4\] #test-setup id=quiet .* -> PASSED in ", log, re.M), log
    assert re.search(r"^==> \[4/4\] #test-setup id=nothing .* -> PASSED in ", log, re.M), log


def test_a_skipped_block_is_one_line(guide_runner) -> None:
    run = guide_runner(f"{FENCE}shell #test-setup skip='no NPU here'\nnpu-smi info\n{FENCE}\n\n{_blocks(1)}")
    assert "\n[1/2] #1: SKIPPED: no NPU here\n==> [2/2]" in _log(run)
    assert _log(run).splitlines()[-1].startswith("=== guide.md: PASSED (2 blocks: 1 passed, 1 skipped) in ")


# --- the end of the log names what failed


def test_the_last_lines_name_each_failing_block_then_the_verdict_in_status_order(guide_runner) -> None:
    drifts = (
        f'{FENCE}shell #test id="drifts"\necho two\n{FENCE}\n\n{FENCE}shell #test-result id="drifts"\none\n{FENCE}\n'
    )
    guide = "\n".join([_setup("breaks", "echo 'about to fail'", "exit 3"), _blocks(2), drifts])
    run = guide_runner(guide, "--keep-going")
    assert run.returncode == 1
    line = _line_of(guide, f'{FENCE}shell #test-result id="drifts"') + 1  # the expected line blamed
    lines = _log(run).splitlines()
    assert lines[-4:-1] == [
        "2 blocks did not pass:",
        "  FAILED breaks at guide.md:1: exit 3: about to fail",  # what it said last (on stdout: stderr is empty)
        f"  MISMATCH drifts at guide.md:{line}: stdout does not match the expected output from its line 1: 'one'",
    ]
    # passed first, whatever order the statuses came in
    assert re.fullmatch(
        r"\[ERROR\] === guide\.md: FAILED \(4 blocks: 2 passed, 1 failed, 1 mismatch\) in \d+\.\ds", lines[-1]
    )


def test_one_block_one_failure_and_one_byte_are_singular(guide_runner) -> None:
    run = guide_runner(f'{FENCE}shell #test-setup store="letter"\nprintf x\nexit 1\n{FENCE}\n')
    lines = _log(run).splitlines()
    assert lines[0] == "=== guide.md: 1 block"
    assert lines[-3:-1] == ["1 block did not pass:", "  FAILED letter at guide.md:1: exit 1: x"]
    assert "(1 block: 1 failed)" in lines[-1]
    stored = guide_runner(f'{FENCE}shell #test-setup store="letter"\nprintf x\n{FENCE}\n', "-v")
    assert "--- stored letter (1 byte)\n" in stored.stdout


def test_an_interrupted_run_ends_with_the_recap_and_its_verdict(guide_runner) -> None:
    run = guide_runner(_setup("stops-the-run", 'kill -TERM "$(cat out/harness.pid)"', "sleep 30") + "\n" + _blocks(1))
    assert run.returncode == 143, _log(run)
    lines = _log(run).splitlines()
    assert lines[-3] == "1 block did not pass:"
    assert lines[-2].startswith("  ERROR stops-the-run at guide.md:1: ")
    assert lines[-1].startswith("[ERROR] === guide.md: INTERRUPTED (2 blocks: 1 error, 1 not_run) in ")


def test_the_recap_comes_after_the_processes_left_running(guide_runner) -> None:
    run = guide_runner(_setup("server", "sleep 300 &", "exit 2"), "--grace", "1")
    assert run.returncode == 1
    log = _log(run)
    assert log.index("processes still running at the end of the run, now ended:") < log.index("did not pass:")
    assert log.splitlines()[-2:][0] == "  FAILED server at guide.md:1: exit 2"


def test_several_guides_end_with_one_recap_a_line_per_guide_and_the_runs_verdict(tmp_path: Path, run_harness) -> None:
    (tmp_path / "one.md").write_text(_blocks(2))
    (tmp_path / "two.md").write_text(f'{FENCE}shell #test-setup id="broken"\nexit 5\n{FENCE}\n\n{_blocks(1)}')
    done = run_harness("one.md", "two.md", "--output-dir", "out", timeout_s=120)
    assert done.returncode == 1
    tail = [re.sub(r"\d+\.\ds$", "Ns", line) for line in done.stdout.splitlines()[-5:]]
    assert tail == [
        "1 block did not pass:",
        "  FAILED broken at two.md:1: exit 5",
        "=== one.md: PASSED (2 blocks: 2 passed) in Ns",
        "[ERROR] === two.md: FAILED (2 blocks: 1 failed, 1 not_run) in Ns",
        "[ERROR] === 2 guides: FAILED (4 blocks: 2 passed, 1 failed, 1 not_run) in Ns",
    ]


def test_an_interrupted_run_of_several_guides_says_which_it_never_got_to(tmp_path: Path, run_harness) -> None:
    (tmp_path / "one.md").write_text(_setup("stops-the-run", 'kill -TERM "$(cat out/harness.pid)"', "sleep 30"))
    (tmp_path / "two.md").write_text(_blocks(1))
    done = run_harness("one.md", "two.md", "--output-dir", "out", timeout_s=120)
    assert done.returncode == 143
    tail = [re.sub(r"\d+\.\ds$", "Ns", line) for line in done.stdout.splitlines()[-3:]]
    assert tail == [
        "[ERROR] === one.md: INTERRUPTED (1 block: 1 error) in Ns",
        "=== two.md: NOT_RUN (1 block: 1 not_run) in Ns",
        "[ERROR] === 2 guides: INTERRUPTED (2 blocks: 1 error, 1 not_run) in Ns",
    ]


# --- colour where it helps


@pytest.mark.parametrize(
    ("environ", "github", "tty", "wanted"),
    [
        ({}, False, False, False),  # a file or a pipe
        ({}, False, True, True),  # a terminal
        ({}, True, False, True),  # the log of GitHub Actions renders ANSI colour
        ({"NO_COLOR": "1"}, True, True, False),
        ({"NO_COLOR": ""}, False, True, True),  # set but empty: as if unset
        ({"FORCE_COLOR": "1"}, False, False, True),
        ({"FORCE_COLOR": "0"}, False, False, True),  # any value that is not empty, as force-color.org says
        ({"FORCE_COLOR": ""}, False, False, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, False, True),  # forced wins
        ({"TERM": "dumb"}, False, True, False),  # a terminal that cannot show colour
        ({"TERM": "dumb", "FORCE_COLOR": "1"}, False, True, True),
        ({"TERM": "dumb"}, True, False, True),  # the runner's log is not that terminal
    ],
)
def test_when_the_log_gets_colour(environ: dict[str, str], github: bool, tty: bool, wanted: bool) -> None:
    class Console(io.StringIO):
        def isatty(self) -> bool:
            return tty

    assert colour_wanted(Console(), environ, github=github) is wanted


COLOURED_GUIDE = f"""
    {FENCE}shell #test-setup id="ok"
    printf '\\033[35mmagenta\\033[0m\\n'
    {FENCE}

    {FENCE}shell #test id="leaks"
    echo "token: $HF_TOKEN"
    {FENCE}

    {FENCE}shell #test-result id="leaks"
    token: none
    {FENCE}
    """
SECRET = "hf_colour_must_not_split_this_secret_0123"


def test_forced_colour_paints_status_words_and_the_diff_after_masking_and_never_the_files(guide_runner) -> None:
    run = guide_runner(COLOURED_GUIDE, "-v", "--junit", "junit.xml", env={"FORCE_COLOR": "1", "HF_TOKEN": SECRET})
    assert run.returncode == 1
    log = _log(run)
    assert f"[1/2] ok: {GREEN_PASSED} in " in log
    assert "[ERROR] [2/2] leaks: \x1b[31mMISMATCH\x1b[0m in " in log
    assert "\n\x1b[31m-token: none\x1b[0m\n\x1b[32m+token: ***\x1b[0m\n" in log  # masked, then painted
    assert "\n  \x1b[31mMISMATCH\x1b[0m leaks at guide.md:10: " in log  # its expected line
    assert log.splitlines()[-1].startswith("[ERROR] === guide.md: \x1b[31mFAILED\x1b[0m (2 blocks: ")
    assert SECRET[:6] not in log
    # block output is never coloured by the harness, and its own escapes are cleaned as ever
    assert "\n--- stdout (17 B)\nmagenta\n[1/2] ok: " in log and "\x1b[35m" not in log  # -v shows it, cleaned
    for report in (run.output_dir / "results.json", run.guide.parent / "junit.xml"):
        assert "\x1b" not in report.read_text(encoding="utf-8")


def test_a_changed_line_starting_like_a_diff_header_is_coloured_too(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="sql"
        echo '++ counter'
        {FENCE}

        {FENCE}shell #test-result id="sql"
        -- a comment
        {FENCE}
        """,
        env={"FORCE_COLOR": "1"},
    )
    assert run.returncode == 1
    assert "\n\x1b[31m--- a comment\x1b[0m\n\x1b[32m+++ counter\x1b[0m\n" in run.stdout, run.stdout


def test_no_colour_in_a_pipe_nor_with_no_color_under_actions(guide_runner) -> None:
    assert "\x1b" not in guide_runner(COLOURED_GUIDE, "-v").stdout
    assert "\x1b" not in guide_runner(COLOURED_GUIDE, "-v", env={"GITHUB_ACTIONS": "true", "NO_COLOR": "1"}).stdout
    assert GREEN_PASSED in guide_runner(COLOURED_GUIDE, env={"GITHUB_ACTIONS": "true"}).stdout


def test_a_terminal_gets_colour(tmp_path: Path, harness_env: dict[str, str]) -> None:
    (tmp_path / "guide.md").write_text(_blocks(1))
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "ci.run", "guide.md", "--output-dir", "out"],
        cwd=tmp_path,
        env=harness_env,
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=subprocess.DEVNULL,
    ) as harness:
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 1 << 16)
            except OSError:  # EIO: the harness closed its end
                break
            if not chunk:
                break
            seen += chunk
        assert harness.wait(timeout=60) == 0
    os.close(controller)
    assert GREEN_PASSED.encode() in seen, seen


# --- a heartbeat for long blocks

SLOW_GUIDE = f"""
    {FENCE}shell #test-setup id="slow"
    echo 'first line'
    sleep 2.5
    {FENCE}
    """


def test_a_silent_block_gets_a_heartbeat_with_its_last_line(guide_runner) -> None:
    run = guide_runner(SLOW_GUIDE, "--heartbeat", "1")
    assert run.returncode == 0
    beats = [line for line in _log(run).splitlines() if line.startswith("... still running")]
    assert beats, _log(run)
    assert all(
        re.fullmatch(r"\.\.\. still running slow: \d+\.\ds, stdout 11 B, stderr 0 B, last line: first line", line)
        for line in beats
    ), beats
    # the header's line is ended before the first beat; the verdict has a line of its own after the last
    assert "==> [1/1] #test-setup id=slow at guide.md:1\n... still running slow: " in _log(run)
    assert re.search(r"\n\[1/1\] slow: PASSED in [\d.]+s \(exit 0, stdout 11 B, stderr 0 B\)\n", _log(run))


def test_a_heartbeat_says_no_output_yet_only_when_there_is_none(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup id="quiet"
        sleep 2.5
        {FENCE}

        {FENCE}shell #test-setup id="blank"
        printf '\\n\\n\\n'
        sleep 2.5
        {FENCE}
        """,
        "--heartbeat",
        "1",
    )
    assert run.returncode == 0
    beats = [line for line in _log(run).splitlines() if line.startswith("... still running")]
    assert {line.split(": ", 1)[0] for line in beats} == {"... still running quiet", "... still running blank"}
    assert all(line.endswith("stdout 0 B, stderr 0 B, no output yet") for line in beats if " quiet:" in line)
    assert all(line.endswith("stdout 3 B, stderr 0 B, last line: (blank)") for line in beats if " blank:" in line)


def test_a_silent_block_after_many_quick_ones_gets_its_heartbeat_and_they_none(guide_runner) -> None:
    # one watcher serves every block of the run: handed from block to block, it still beats for the one that needs it
    guide = "\n".join([_blocks(20), _setup("slow", "echo 'slow line'", "sleep 2.5")])
    run = guide_runner(guide, "--heartbeat", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    beats = [line for line in _log(run).splitlines() if line.startswith("... still running")]
    assert beats, _log(run)
    assert all(line.startswith("... still running slow: ") for line in beats), beats
    assert all(line.endswith("stdout 10 B, stderr 0 B, last line: slow line") for line in beats), beats
    assert all(f"[{n}/21] #test-setup id=b{n} at guide.md:{4 * n - 3} -> PASSED" in _log(run) for n in range(1, 21))


def test_past_its_time_limit_the_heartbeat_says_the_block_is_being_ended_not_still_running(guide_runner) -> None:
    # the block ignores SIGTERM: the harness waits out the grace period before SIGKILL, beating meanwhile
    guide = f'{FENCE}shell #test-setup id="stubborn" timeout="1"\ntrap "" TERM; echo started; sleep 30\n{FENCE}\n'
    run = guide_runner(guide, "--heartbeat", "1", "--grace", "4")
    assert run.returncode == 1, _log(run)
    beats = [line for line in _log(run).splitlines() if line.startswith("... ")]
    ending = [line for line in beats if line.startswith("... ending stubborn, timed out after 1s: ")]
    assert ending, beats
    assert beats[beats.index(ending[0]) :] == ending, "once being ended, never said to be still running"
    assert all(line.endswith("stdout 8 B, stderr 0 B, last line: started") for line in ending), ending


def test_heartbeat_zero_turns_it_off(guide_runner) -> None:
    run = guide_runner(SLOW_GUIDE, "--heartbeat", "0")
    assert run.returncode == 0
    assert "still running" not in _log(run)


def test_a_bad_heartbeat_is_a_usage_error(guide_runner) -> None:
    run = guide_runner(_blocks(1), "--heartbeat", "often")
    assert run.returncode == 2
    assert "--heartbeat: bad duration 'often'" in run.stderr


@pytest.mark.parametrize("often", ["0.01", "0.5s"])
def test_a_heartbeat_under_a_second_is_a_usage_error_not_a_flood(guide_runner, often: str) -> None:
    run = guide_runner(_blocks(1), "--heartbeat", often)
    assert run.returncode == 2, run.stdout
    assert f"--heartbeat {often}: at least 1s between heartbeats (or 0 to turn them off)" in run.stderr
    assert "still running" not in run.stdout


def test_with_stream_the_heartbeat_speaks_only_when_the_output_is_silent(guide_runner) -> None:
    run = guide_runner(SLOW_GUIDE, "--stream", "--heartbeat", "1")
    assert run.returncode == 0
    assert "\n| first line\n... still running slow: " in _log(run)


def _heartbeat_on(guide_runner, printf: str, secret: str) -> str:  # type: ignore[no-untyped-def]
    """The log of a block that prints, by PRINTF, a line holding SECRET, then sleeps through heartbeats: it passes."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        {printf}
        sleep 2.5
        {FENCE}
        """,
        "--heartbeat",
        "1",
        env={"HF_TOKEN": secret},
    )
    assert run.returncode == 0
    return _log(run)


def test_the_heartbeat_masks_its_last_line_before_cutting_it(guide_runner) -> None:
    secret = "hf_heartbeat_secret_value_0123456789"
    # the secret straddles the heartbeat's 120-character cut: cut before masking, its start would show
    log = _heartbeat_on(guide_runner, """printf '%s%s%s\\n' "$(printf 'x%.0s' $(seq 110))" "$HF_TOKEN" tail""", secret)
    beat = next(line for line in log.splitlines() if line.startswith("... still running"))
    assert beat.endswith("last line: " + "x" * 110 + "***tail"), beat
    assert secret[:4] not in log


def test_the_heartbeat_never_shows_the_end_of_a_secret_its_bounded_read_begins_in(guide_runner) -> None:
    secret = "hf_the_heartbeat_reads_from_inside_me_42"
    # one line longer than the heartbeat reads of it (4 KiB and the masker's longest form of the secret, its
    # 56-character base64), the secret at its start: the read begins inside it
    log = _heartbeat_on(
        guide_runner, '''printf '%s%s\\n' "$HF_TOKEN" "$(head -c 4140 /dev/zero | tr '\\0' z)"''', secret
    )
    beat = next(line for line in log.splitlines() if line.startswith("... still running"))
    assert re.search(r"last line: z{120} \[\.\.\.\]$", beat), beat
    assert secret[-6:] not in log
