"""A run stopped from outside or broken by a bug of its own: SIGTERM and SIGINT to the harness, an internal
error in a block or in the console; what the run started is still ended and every report is still written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

FENCE = "```"


def _start_harness(tmp_path: Path, env: dict[str, str], pidfile: Path) -> subprocess.Popen[str]:
    guide = tmp_path / "long.md"
    guide.write_text(
        f"{FENCE}shell #test-setup\nsleep 300 &\necho $! > {pidfile}\necho started\nsleep 300\n{FENCE}\n\n"
        f"{FENCE}shell #test-setup\necho never\n{FENCE}\n"
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ci.run",
            str(guide),
            "--output-dir",
            str(tmp_path / "out"),
            "--junit",
            str(tmp_path / "j.xml"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path) -> None:
    for _ in range(300):
        if path.exists() and path.read_text().strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_sigterm_to_the_harness_writes_reports_and_exits_143(tmp_path: Path, harness_env: dict[str, str]) -> None:
    pidfile = tmp_path / "bg.pid"
    harness = _start_harness(tmp_path, harness_env, pidfile)
    _wait_for(pidfile)
    harness.send_signal(signal.SIGTERM)
    stdout, _ = harness.communicate(timeout=30)
    assert harness.returncode == 143, stdout
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["exit_status"] == 143
    assert [b["status"] for b in record["blocks"]] == ["error", "not_run"]
    assert "interrupted by SIGTERM" in record["blocks"][0]["message"]
    assert (tmp_path / "j.xml").exists()
    assert not psutil.pid_exists(int(pidfile.read_text()))


# the harness with a simulated bug: run_step wrapped so that it raises for the blocks WHEN names
_BUG_IN_RUN_STEP = """
import sys
import ci.runner.execute
from ci.run import main

original = ci.runner.execute.run_step


def run_step(step, *args):
    done = original(step, *args) if {after} else None
    if {when}:
        raise {error}("simulated bug in the harness")
    return done if {after} else original(step, *args)


ci.runner.execute.run_step = run_step
sys.exit(main(sys.argv[1:]))
"""


# the harness with a simulated bug in its console: no block's verdict can be shown
_BUG_IN_THE_CONSOLE = """
import sys
from ci.report.console import ConsoleReporter
from ci.run import main


def block_finished(self, result, total):
    raise KeyError("simulated bug in the console")


ConsoleReporter.block_finished = block_finished
sys.exit(main(sys.argv[1:]))
"""


def _run_with_a_bug(script: str, cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_an_internal_error_still_ends_what_the_run_started(tmp_path: Path, harness_env: dict[str, str]) -> None:
    pidfile = tmp_path / "server.pid"
    guide = tmp_path / "guide.md"
    guide.write_text(
        f"{FENCE}shell #test-setup\nsleep 300 &\necho $! > {pidfile}\n{FENCE}\n\n{FENCE}shell #test-setup\ntrue\n{FENCE}\n"
    )
    bug = _BUG_IN_RUN_STEP.format(after=True, when="step.ordinal == 2", error="RuntimeError")  # once it has run
    done = _run_with_a_bug(bug, tmp_path, harness_env, str(guide), "--output-dir", "out")
    assert done.returncode == 1, done.stderr
    assert "RuntimeError: simulated bug in the harness" in done.stderr
    assert "guide-guard had an internal error (a bug: please report it with this traceback)" in done.stderr
    # the bug is the block's error: the run ends with its verdict and every report
    blocks = json.loads((tmp_path / "out" / "results.json").read_text())["blocks"]
    assert [block["status"] for block in blocks] == ["passed", "error"]
    message = blocks[1]["message"]
    assert message.startswith("internal error of guide-guard (a bug: please report it): RuntimeError: simulated bug")
    trace = tmp_path / "out" / "blocks" / "002-2.harness-error.txt"
    assert f"traceback in {trace}" in message
    assert "RuntimeError: simulated bug in the harness" in trace.read_text()
    assert done.stdout.splitlines()[-1].startswith(f"[ERROR] === {guide}: FAILED (2 blocks: 1 passed, 1 error) in ")
    server = int(pidfile.read_text())
    assert not psutil.pid_exists(server) or psutil.Process(server).status() == "zombie"


def test_a_bug_in_one_guide_leaves_the_next_guide_run_and_every_report_written(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text(f"{FENCE}shell #test-setup\necho one\n{FENCE}\n\n{FENCE}shell #test-setup\necho two\n{FENCE}\n")
    second.write_text(
        f'{FENCE}shell #test id="still"\necho fine\n{FENCE}\n\n{FENCE}shell #test-result id="still"\nfine\n{FENCE}\n'
    )
    when = 'step.file.endswith("first.md") and step.ordinal == 1'
    bug = _BUG_IN_RUN_STEP.format(after=False, when=when, error="ValueError")  # before it runs
    done = _run_with_a_bug(
        bug, tmp_path, harness_env, "first.md", "second.md", "--output-dir", "out", "--junit", "junit.xml"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ValueError: simulated bug in the harness" in done.stderr
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [block["status"] for block in record["blocks"]] == ["error", "not_run", "passed"]
    assert "internal error of guide-guard" in (tmp_path / "junit.xml").read_text()
    assert (
        "  ERROR #1 at first.md:1: internal error of guide-guard (a bug: please report it): ValueError" in done.stdout
    )
    assert done.stdout.splitlines()[-1].startswith("[ERROR] === 2 guides: FAILED")


def test_a_bug_in_showing_a_block_costs_its_lines_in_the_log_not_the_run(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text("".join(f'{FENCE}shell #test-setup id="b{n}"\necho {n}\n{FENCE}\n\n' for n in (1, 2, 3)))
    done = _run_with_a_bug(_BUG_IN_THE_CONSOLE, tmp_path, harness_env, "guide.md", "--output-dir", "out")
    assert done.returncode == 0, done.stdout + done.stderr  # the blocks passed: the verdict is theirs
    errors = [line for line in done.stderr.splitlines() if line.startswith("[ERROR]")]
    assert errors == [
        "[ERROR] guide-guard could not show the verdict of block b1 in the log (a bug: please report it);"
        " the run goes on and writes every report:",
        "[ERROR] guide-guard could not show the verdict of block b2 in the log (a bug: please report it) again:"
        " KeyError: 'simulated bug in the console'",
        "[ERROR] guide-guard could not show the verdict of block b3 in the log (a bug: please report it) again:"
        " KeyError: 'simulated bug in the console'",
    ]
    assert done.stderr.count("Traceback (most recent call last)") == 1
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [block["status"] for block in record["blocks"]] == ["passed"] * 3
    assert done.stdout.splitlines()[-1].startswith("=== guide.md: PASSED (3 blocks: 3 passed) in ")


def test_sigint_to_the_harness_exits_130(tmp_path: Path, harness_env: dict[str, str]) -> None:
    pidfile = tmp_path / "bg.pid"
    harness = _start_harness(tmp_path, harness_env, pidfile)
    _wait_for(pidfile)
    harness.send_signal(signal.SIGINT)
    harness.communicate(timeout=30)
    assert harness.returncode == 130
    assert not psutil.pid_exists(int(pidfile.read_text()))
