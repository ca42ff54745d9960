"""Stopping a run from outside: signals wherever the harness is, the pid file, the run deadline, the ptrace check.

Every test starts a real harness on a real guide. "Ends quickly" is tested by
making the slow path impossibly slow (a grace period of 600 s against a test
limit of 60 s), never by timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from waiting import wait_for

from ci.process.stacks import ptrace_refusal

FENCE = "```"
WARNING = "stack dumps on timeout will be missing"
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def _has_text(path: Path, text: str = "") -> Callable[[], bool]:
    return lambda: path.exists() and text in path.read_text() and bool(path.read_text().strip())


class Harness:
    """`python -m ci.run` started in the background as a CI step starts it: every report asked for."""

    def __init__(
        self,
        tmp_path: Path,
        env: dict[str, str],
        guides: list[str],
        *args: str,
        launcher: tuple[str, ...] = (),
        **popen: Any,
    ) -> None:
        self.tmp_path = tmp_path
        self.out = tmp_path / "out"
        self.junit = tmp_path / "junit.xml"
        self.summary = tmp_path / "summary.md"
        paths = []
        for number, text in enumerate(guides, 1):
            path = tmp_path / f"guide{number}.md"
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        self.stdout_path, self.stderr_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        full_env = {**env, "GITHUB_ACTIONS": "true", SUMMARY_ENV: str(self.summary)}
        argv = [*launcher, sys.executable, "-m", "ci.run", *paths, "--output-dir", str(self.out)]
        given = popen.pop("preexec_fn", None)

        def as_a_step_starts() -> None:
            # a suite run from a script's background job or under nohup would hand these down ignored, and a
            # harness keeps an ignored hangup ignored on purpose (test_under_nohup_a_hangup_leaves_the_run_going)
            for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
                signal.signal(signum, signal.SIG_DFL)
            if given is not None:
                given()

        with open(self.stdout_path, "wb") as stdout, open(self.stderr_path, "wb") as stderr:
            popen["preexec_fn"] = as_a_step_starts
            popen.setdefault("stdout", stdout)
            popen.setdefault("stderr", stderr)
            popen.setdefault("stdin", subprocess.DEVNULL)
            self.process = subprocess.Popen(
                [*argv, "--junit", str(self.junit), *args], cwd=tmp_path, env=full_env, **popen
            )

    def finish(self, limit_s: float = 60) -> int:
        try:
            return self.process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the harness was still running {limit_s:g} s later:\n{self.stdout[-3000:]}") from None

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    @property
    def record(self) -> dict[str, Any]:
        return json.loads((self.out / "results.json").read_text(encoding="utf-8"))

    def block(self, ident: str) -> dict[str, Any]:
        return next(b for b in self.record["blocks"] if ident in (b["id"], b["store"]))

    def assert_reported(self, exit_status: int) -> None:
        """Every report was written, and the pid file is gone."""
        assert self.record["exit_status"] == exit_status, self.stdout[-3000:]
        assert "<testsuite" in self.junit.read_text(encoding="utf-8")
        assert self.summary.read_text(encoding="utf-8").strip()
        assert not (self.out / "harness.pid").exists()

    def stopped_by(self, signum: int, ready: Callable[[], bool], what: str) -> None:
        """Once READY holds (WHAT it waits for), send SIGNUM: the run ends with 128 + SIGNUM, every report written."""
        wait_for(ready, what)
        self.process.send_signal(signum)
        assert self.finish() == 128 + signum
        self.assert_reported(128 + signum)

    def stop_and_signal(self, *signums: int) -> None:
        """Deliver these signals together: stopped, the harness cannot act on one before the next is pending."""
        pid = self.process.pid
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, "the harness to stop")
        for signum in signums:
            os.kill(pid, signum)
        os.kill(pid, signal.SIGCONT)


def _trapping_loop(term_file: Path, ready: Path) -> str:
    """Shell lines that note every SIGTERM in term_file and go on; SIGKILL alone ends them."""
    return (
        f"trap 'echo TERM >> {term_file}' TERM\n"
        f"echo $$ >> {ready}\n"
        "while :; do sleep 0.2; done\n"  # a command after the sleep in the loop: bash does not exec it
    )


def _long_block_then_another(server_pid: Path) -> str:
    """A guide whose block `long` starts a background sleep (its pid in SERVER_PID) and sleeps; `after` follows."""
    return (
        f'{FENCE}shell #test-setup id="long"\nsleep 300 &\necho $! > {server_pid}\nsleep 300\n{FENCE}\n\n'
        f'{FENCE}shell #test-setup id="after"\necho never\n{FENCE}\n'
    )


# -- harness.pid ------------------------------------------------------------------------------------


def test_the_workflows_stop_step_signals_the_pid_in_harness_pid(tmp_path: Path, harness_env: dict[str, str]) -> None:
    server_pid = tmp_path / "server.pid"
    harness = Harness(
        tmp_path,
        harness_env,
        [_long_block_then_another(server_pid)],
    )
    pid_file = harness.out / "harness.pid"
    wait_for(_has_text(server_pid), "the block to start")
    # as the `if: cancelled()` step does: kill -TERM "$(cat "$REPORT_DIR/outputs/harness.pid")", then wait
    assert int(pid_file.read_text()) == harness.process.pid
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    assert harness.finish() == 143
    harness.assert_reported(143)
    assert [b["status"] for b in harness.record["blocks"]] == ["error", "not_run"]
    assert not psutil.pid_exists(int(server_pid.read_text()))


BUGGY_HARNESS = """
import sys
import ci.runner.execute
from ci.run import main


def run_step(*args):
    raise RuntimeError("simulated bug in the harness")


ci.runner.execute.run_step = run_step
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("path", "body", "args", "exit_status"),
    [
        ("passed", 'test "$(cat out/harness.pid)" = "$PPID"', (), 0),
        ("failed", "exit 3", (), 1),
        ("deadline", "sleep 300", ("--deadline", "1"), 1),
        ("internal error", "true", (), 1),
    ],
)
def test_the_pid_file_names_the_harness_while_it_runs_and_is_gone_after(
    tmp_path: Path, harness_env: dict[str, str], path: str, body: str, args: tuple[str, ...], exit_status: int
) -> None:
    guide = tmp_path / "g.md"
    guide.write_text(f"{FENCE}shell #test-setup\n{body}\n{FENCE}\n")
    start = ["-c", BUGGY_HARNESS] if path == "internal error" else ["-m", "ci.run"]
    done = subprocess.run(
        [sys.executable, *start, str(guide), "--output-dir", "out", *args],
        cwd=tmp_path,
        env=harness_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == exit_status, done.stdout + done.stderr
    assert (tmp_path / "out").is_dir()
    assert not (tmp_path / "out" / "harness.pid").exists()
    if path == "internal error":
        assert "simulated bug in the harness" in done.stderr


def test_a_second_run_on_the_same_output_directory_is_refused_and_the_first_goes_on(
    tmp_path: Path, harness_env: dict[str, str], run_harness
) -> None:
    release, started = tmp_path / "release", tmp_path / "started"
    first_guide, second_guide = tmp_path / "first.md", tmp_path / "second.md"
    first_guide.write_text(
        f"{FENCE}shell #test-setup\ntouch {started}\nuntil [ -e {release} ]; do sleep 0.1; done\necho first\n{FENCE}\n"
    )
    second_guide.write_text(f'{FENCE}shell #test-setup id="second"\necho second\n{FENCE}\n')
    first = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(first_guide), "--output-dir", "out"],
        cwd=tmp_path,
        env=harness_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(started.exists, "the first run's block to start")
        second = run_harness(str(second_guide), "--output-dir", "out")
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"[ERROR] --output-dir {tmp_path / 'out'} is in use by another run (pid {first.pid})" in second.stderr
        assert (tmp_path / "out" / "harness.pid").read_text().strip() == str(first.pid)  # not taken over
        release.touch()
        assert first.wait(timeout=60) == 0
    finally:
        release.touch()
        if first.poll() is None:
            first.kill()
        first.wait(timeout=60)
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [b["status"] for b in record["blocks"]] == ["passed"] and "second" not in {b["id"] for b in record["blocks"]}


def test_a_pid_file_that_cannot_be_written_stops_the_run_before_its_first_block(tmp_path: Path, guide_runner) -> None:
    out = tmp_path / "out"
    (out / "harness.pid").mkdir(parents=True)  # left there by something else: the harness cannot write its file
    ran = tmp_path / "ran"
    done = guide_runner(
        f"{FENCE}shell #test-setup\ntouch {ran}\n{FENCE}\n", "--junit", str(tmp_path / "junit.xml"), name="g.md"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"[ERROR] cannot write the pid file {out / 'harness.pid'} (Is a directory); nothing was run." in done.stderr
    assert "or name another --output-dir" in done.stderr and "Traceback" not in done.stderr
    assert not ran.exists() and not (tmp_path / "junit.xml").exists()
    # nothing half-written is left beside it, and what was in the way is untouched
    assert [path.name for path in out.iterdir()] == ["harness.pid"] and (out / "harness.pid").is_dir()


# -- --deadline -------------------------------------------------------------------------------------


def test_the_run_deadline_stops_the_running_block_and_leaves_the_rest_not_run(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    started = tmp_path / "started"
    harness = Harness(
        tmp_path,
        harness_env,
        [
            f'{FENCE}shell #test-setup id="quick"\necho one\n{FENCE}\n\n'
            # no timeout of its own: only the run deadline can stop it within the test's minute
            f'{FENCE}python #test-setup id="slow"\nimport time\nopen("{started}", "w").close()\ntime.sleep(3000)\n{FENCE}\n\n'
            f'{FENCE}shell #test-setup id="later"\necho never\n{FENCE}\n',
            f'{FENCE}shell #test-setup id="next-guide"\necho never either\n{FENCE}\n',
        ],
        "--deadline",
        "8",  # room for the harness's start and the first block on a loaded machine
    )
    assert harness.finish() == 1
    harness.assert_reported(1)
    assert started.exists()
    assert harness.block("quick")["status"] == "passed"
    slow = harness.block("slow")
    assert slow["status"] == "timed_out"
    assert "the run deadline was reached" in slow["message"]
    assert slow["stack_dumps"], slow["stack_dump_notes"]  # dumped first, as on a timeout
    assert "time.sleep" in (harness.out / slow["stack_dumps"][0]).read_text()
    for later in ("later", "next-guide"):
        assert harness.block(later)["status"] == "not_run"
        assert harness.block(later)["message"] == "run deadline"
    assert [guide["failed"] for guide in harness.record["guides"]] == [True, True]
    assert harness.junit.read_text().count('"not run: run deadline"') == 2
    assert "the run deadline (--deadline 8) was reached: 2 blocks not run" in harness.stdout


def test_after_the_deadline_diagnostics_are_short_and_the_logs_are_still_collected(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """The workflow's margin below the job limit must hold the diagnostics: each gets 10 s, not its hour."""
    log = tmp_path / "server.log"
    front = (
        "---\nci:\n"
        f'  collect: ["{log}"]\n'
        '  diagnostics: ["echo looking; sleep 3000"]\n'
        "  diagnostics_timeout: 1h\n"
        "---\n\n"
    )
    harness = Harness(
        tmp_path,
        harness_env,
        [front + f'{FENCE}shell #test-setup id="hangs"\necho serving > {log}\nsleep 3000\n{FENCE}\n'],
        "--deadline",
        "3",
    )
    assert harness.finish() == 1
    harness.assert_reported(1)
    hangs = harness.block("hangs")
    assert hangs["status"] == "timed_out" and "the run deadline was reached" in hangs["message"]
    [diagnostic] = hangs["diagnostics"]
    assert diagnostic["timed_out"] and diagnostic["message"].startswith("timed out after 10s")
    assert "looking" in (harness.out / diagnostic["output_path"]).read_text()
    [collected] = harness.record["guides"][0]["collected"]["files"]
    assert "serving" in (harness.out / collected["copied_to"]).read_text()


def test_a_blocks_own_shorter_timeout_still_applies_under_a_deadline(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup id="short" timeout='1'
        sleep 300
        {FENCE}

        {FENCE}shell #test-setup id="after"
        echo still on time
        {FENCE}
        """,
        "--deadline",
        "10m",
        "--keep-going",
    )
    assert run.returncode == 1
    assert run.block("short")["status"] == "timed_out"
    assert run.block("short")["message"].startswith("timed out after 1s")
    assert run.block("after")["status"] == "passed"


def test_a_bad_deadline_is_a_usage_error(guide_runner) -> None:
    run = guide_runner(f"{FENCE}shell #test-setup\necho hi\n{FENCE}\n", "--deadline", "soon")
    assert run.returncode == 2
    assert "bad duration 'soon'" in run.stderr


# -- signals, wherever the harness is ---------------------------------------------------------------


def test_sigterm_while_waiting_on_a_block_that_ignores_it(tmp_path: Path, harness_env: dict[str, str]) -> None:
    term, ready = tmp_path / "term", tmp_path / "ready"
    harness = Harness(
        tmp_path,
        harness_env,
        [f'{FENCE}shell #test-setup id="stubborn"\n{_trapping_loop(term, ready)}{FENCE}\n'],
        "--grace",
        "600",
    )
    harness.stopped_by(signal.SIGTERM, _has_text(ready), "the block to start")
    block = harness.block("stubborn")
    assert block["status"] == "error" and "interrupted by SIGTERM" in block["message"]
    assert "TERM" in term.read_text()  # it was asked first
    main = next(p for p in block["processes_ended"] if p["pid"] == int(ready.read_text()))
    assert main["ended_by"] == "SIGKILL"


def test_sigterm_during_a_timed_out_blocks_grace_period(tmp_path: Path, harness_env: dict[str, str]) -> None:
    term, ready = tmp_path / "term", tmp_path / "ready"
    harness = Harness(
        tmp_path,
        harness_env,
        [
            f"{FENCE}shell #test-setup id=\"stubborn\" timeout='1'\n{_trapping_loop(term, ready)}{FENCE}\n\n"
            f'{FENCE}shell #test-setup id="after"\necho never\n{FENCE}\n'
        ],
        "--grace",
        "600",
    )
    # the harness is in the 600 s grace period when the signal comes
    harness.stopped_by(signal.SIGTERM, _has_text(term, "TERM"), "the time-out's SIGTERM")
    assert harness.block("stubborn")["status"] == "timed_out"
    assert harness.block("after")["status"] == "not_run"
    assert harness.record["guides"][0]["interrupted_by_signal"] == 15


HUNG_PY_SPY = """#!/bin/sh
# SIMULATION of a py-spy that hangs (attached to a process stuck in the kernel, say): it notes that it
# started, then sleeps. Real py-spy is not used here because a real hang cannot be made on purpose.
echo $$ > "{started}"
exec sleep 300
"""


def test_sigterm_during_a_hung_stack_dump(tmp_path: Path, harness_env: dict[str, str]) -> None:
    started = tmp_path / "py-spy-started"
    fake = tmp_path / "py-spy"
    fake.write_text(HUNG_PY_SPY.format(started=started))
    fake.chmod(0o755)
    harness = Harness(
        tmp_path,
        {**harness_env, "GUIDE_GUARD_PY_SPY": str(fake)},
        [f"{FENCE}python #test-setup id=\"hang\" timeout='1'\nimport time\ntime.sleep(300)\n{FENCE}\n"],
        "--grace",
        "600",
    )
    harness.stopped_by(signal.SIGTERM, _has_text(started), "the stack dump to start")
    block = harness.block("hang")
    assert block["status"] == "timed_out"
    [note] = block["stack_dump_notes"]
    # cut at once, not after py-spy's own 15 s limit ("did not answer in 15s")
    assert note.endswith("py-spy was cut short: the run was interrupted by SIGTERM"), note
    assert not psutil.pid_exists(int(started.read_text())) or psutil.Process(int(started.read_text())).status() == (
        psutil.STATUS_ZOMBIE
    )


def test_sigterm_during_teardown(tmp_path: Path, harness_env: dict[str, str]) -> None:
    term, ready = tmp_path / "term", tmp_path / "ready"
    server = _trapping_loop(term, ready).replace("'", "'\"'\"'")
    harness = Harness(
        tmp_path,
        harness_env,
        [
            f'{FENCE}shell #test-setup id="starts-a-server"\n'
            f"setsid nohup bash -c '{server}' > /dev/null 2>&1 < /dev/null &\n"
            f"while [ ! -s {ready} ]; do sleep 0.05; done\n{FENCE}\n"
        ],
        "--grace",
        "600",
    )
    # the harness is in the 600 s grace period when the signal comes
    harness.stopped_by(signal.SIGTERM, _has_text(term, "TERM"), "the teardown's SIGTERM")
    assert harness.block("starts-a-server")["status"] == "passed"
    [guide] = harness.record["guides"]
    assert guide["interrupted_by_signal"] == 15
    server_pid = int(ready.read_text())
    assert [p["ended_by"] for p in guide["processes_ended"] if p["pid"] == server_pid] == ["SIGKILL"]


# Enough that finding them process by process (a whole /proc scan for each, the cost growing with the
# square of the count) takes minutes on 2 cores, well past the test's limit; one scan takes about a second.
MANY_LEFTOVERS = 2000


def _alive_sleepers(pids: set[int]) -> list[int]:
    """Those of `pids` still running as the test's sleepers (not zombies, not a reused pid)."""
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE and proc.cmdline() == ["sleep", "600"]:
                left.append(pid)
    return left


def test_a_stop_with_thousands_of_detached_leftovers_ends_them_all(tmp_path: Path, harness_env: dict[str, str]) -> None:
    noted, ready = tmp_path / "pids", tmp_path / "ready"
    harness = Harness(
        tmp_path,
        harness_env,
        [
            f'{FENCE}shell #test-setup id="detaches-many"\n'
            f"for i in $(seq {MANY_LEFTOVERS}); do\n"
            f"  setsid sleep 600 < /dev/null > /dev/null 2>&1 &\n  echo $! >> {noted}\ndone\n{FENCE}\n\n"
            f'{FENCE}shell #test-setup id="waiting"\necho up > {ready}\nsleep 600\n{FENCE}\n'
        ],
        "--grace",
        "600",
    )
    sleepers: set[int] = set()
    try:
        wait_for(_has_text(ready), "the second block to start", limit_s=300)
        sleepers = {int(word) for word in noted.read_text().split()}
        harness.process.send_signal(signal.SIGTERM)
        assert harness.finish(limit_s=60) == 143
        harness.assert_reported(143)
        assert harness.block("waiting")["status"] == "error"
        [guide] = harness.record["guides"]
        assert len(sleepers) == MANY_LEFTOVERS
        assert sleepers <= {p["pid"] for p in guide["processes_ended"]}
        assert _alive_sleepers(sleepers) == []
    finally:  # the test leaves nothing either, whatever failed
        if harness.process.poll() is None:
            harness.process.kill()
        sleepers |= {int(word) for word in noted.read_text().split()} if noted.exists() else set()
        for pid in _alive_sleepers(sleepers):
            os.kill(pid, signal.SIGKILL)


def test_a_second_signal_kills_what_is_left_at_once(tmp_path: Path, harness_env: dict[str, str]) -> None:
    block_term, block_ready = tmp_path / "block-term", tmp_path / "block-ready"
    server_term, server_ready = tmp_path / "server-term", tmp_path / "server-ready"
    server = _trapping_loop(server_term, server_ready).replace("'", "'\"'\"'")
    harness = Harness(
        tmp_path,
        harness_env,
        [
            f'{FENCE}shell #test-setup id="starts-a-server"\n'
            f"setsid nohup bash -c '{server}' > /dev/null 2>&1 < /dev/null &\n"
            f"while [ ! -s {server_ready} ]; do sleep 0.05; done\n{FENCE}\n\n"
            f'{FENCE}shell #test-setup id="stubborn"\n{_trapping_loop(block_term, block_ready)}{FENCE}\n'
        ],
        "--grace",
        "600",
    )
    wait_for(_has_text(block_ready), "the second block to start")
    harness.stop_and_signal(signal.SIGTERM, signal.SIGINT)
    # pending together, they are handled lowest number first: SIGINT is the first, the run's status 130
    assert harness.finish() == 130
    harness.assert_reported(130)
    # nothing was asked to stop politely: SIGKILL at once, to the block's tree and at teardown
    assert not block_term.exists() and not server_term.exists()
    ended = harness.block("stubborn")["processes_ended"] + harness.record["guides"][0]["processes_ended"]
    assert {int(block_ready.read_text()), int(server_ready.read_text())} <= {p["pid"] for p in ended}
    assert {p["ended_by"] for p in ended} == {"SIGKILL"}
    assert "a second signal came: what the run had left was killed at once (SIGKILL)" in harness.stderr


def test_sighup_is_a_stop_like_sigterm_with_status_129(tmp_path: Path, harness_env: dict[str, str]) -> None:
    server_pid = tmp_path / "server.pid"
    harness = Harness(
        tmp_path,
        harness_env,
        [_long_block_then_another(server_pid)],
    )
    harness.stopped_by(signal.SIGHUP, _has_text(server_pid), "the block to start")
    assert "interrupted by SIGHUP" in harness.block("long")["message"]
    assert not psutil.pid_exists(int(server_pid.read_text()))


def test_a_closed_terminal_ends_the_run_with_its_reports_written(tmp_path: Path, harness_env: dict[str, str]) -> None:
    import fcntl
    import termios

    server_pid = tmp_path / "server.pid"
    controller, terminal = os.openpty()

    def take_the_terminal() -> None:  # as a login shell's session: the pty is the controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        harness = Harness(
            tmp_path,
            harness_env,
            [f'{FENCE}shell #test-setup id="long"\nsleep 300 &\necho $! > {server_pid}\nsleep 300\n{FENCE}\n'],
            "--stream",  # the console is written to while the block runs
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            start_new_session=True,
            preexec_fn=take_the_terminal,
        )
        os.close(terminal)
        wait_for(_has_text(server_pid), "the block to start")
    finally:
        os.close(controller)  # the ssh session closes: the kernel hangs the terminal up (SIGHUP)
    assert harness.finish() == 129
    harness.assert_reported(129)
    assert not psutil.pid_exists(int(server_pid.read_text()))


def test_under_nohup_a_hangup_leaves_the_run_going(tmp_path: Path, harness_env: dict[str, str]) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"

    def ignore_hangups() -> None:  # what nohup does before it starts the command
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    harness = Harness(
        tmp_path,
        harness_env,
        [f"{FENCE}shell #test-setup\necho up > {ready}\nwhile [ ! -e {go} ]; do sleep 0.05; done\n{FENCE}\n"],
        preexec_fn=ignore_hangups,
    )
    wait_for(_has_text(ready), "the block to start")
    harness.process.send_signal(signal.SIGHUP)
    go.touch()  # a harness that took the hangup would stop now or, at the latest, end with 129 after this block
    assert harness.finish() == 0, harness.stdout[-2000:]
    assert harness.record["blocks"][0]["status"] == "passed"


# -- the ptrace check at the start of the run ---------------------------------------------------------

# Puts the command it starts under a seccomp filter, as a container runtime does. "refuse-ptrace"
# answers ptrace(2) with EPERM, as Docker's default profile does without CAP_SYS_PTRACE on kernels
# before 4.8; "allow-all" lets every call through (a filter is in force, nothing is refused).
SECCOMP_LAUNCHER = r"""
import ctypes, os, platform, struct, sys

mode, argv = sys.argv[1], sys.argv[2:]
machine = platform.machine()
arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[machine]  # AUDIT_ARCH_*
ptrace_nr = {"x86_64": 101, "aarch64": 117}[machine]
LOAD, JUMP_IF_EQUAL, RETURN = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM


def op(code, k, true=0, false=0):
    return struct.pack("HBBI", code, true, false, k)


program = [op(LOAD, 4), op(JUMP_IF_EQUAL, arch, 1, 0), op(RETURN, ALLOW), op(LOAD, 0)]
if mode == "refuse-ptrace":
    program += [op(JUMP_IF_EQUAL, ptrace_nr, 0, 1), op(RETURN, REFUSE)]
program += [op(RETURN, ALLOW)]
code = ctypes.create_string_buffer(b"".join(program))


class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS: a filter needs no privilege then
assert libc.prctl(22, 2, ctypes.byref(Program(len(program), ctypes.addressof(code))), 0, 0) == 0, ctypes.get_errno()
os.execv(argv[0], argv)
"""

# SIMULATION of py-spy refused by the kernel, for a non-root user: the words are real py-spy's
# (its main.rs prints them, then exits 1, when attaching fails with a permission error).
REFUSED_PY_SPY = """#!/bin/sh
echo "Permission Denied: Try running again with elevated permissions by going 'sudo env \\"PATH=\\$PATH\\" !!'" >&2
exit 1
"""


def _seccomp(mode: str) -> tuple[str, ...]:
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the seccomp launcher knows the syscall numbers of x86_64 and aarch64, not {platform.machine()}")
    return (sys.executable, "-c", SECCOMP_LAUNCHER, mode)


def _quick_run(tmp_path: Path, env: dict[str, str], launcher: tuple[str, ...] = (), guides: int = 1) -> Harness:
    harness = Harness(tmp_path, env, [f"{FENCE}shell #test-setup\necho hi\n{FENCE}\n"] * guides, launcher=launcher)
    assert harness.finish() == 0, harness.stdout + harness.stderr
    return harness


def test_no_ptrace_warning_where_py_spy_can_attach(tmp_path: Path, harness_env: dict[str, str]) -> None:
    harness = _quick_run(tmp_path, harness_env)
    assert WARNING not in harness.stderr and WARNING not in harness.stdout


def test_a_missing_py_spy_is_said_once_before_the_first_block(tmp_path: Path, harness_env: dict[str, str]) -> None:
    missing = tmp_path / "no-such-py-spy"
    harness = _quick_run(tmp_path, {**harness_env, "GUIDE_GUARD_PY_SPY": str(missing)}, guides=2)
    [line] = [line for line in harness.stderr.splitlines() if WARNING in line]
    assert line.startswith(f"warning: {WARNING}: GUIDE_GUARD_PY_SPY names {missing}, which is not an executable")
    stdout = harness.stdout.splitlines()
    [annotation] = [i for i, line in enumerate(stdout) if line.startswith(f"::warning title={WARNING}::")]
    first_block = next(i for i, line in enumerate(stdout) if "guide1.md" in line)
    assert annotation < first_block


def test_a_seccomp_filter_refusing_ptrace_is_found_by_a_trial_dump(tmp_path: Path, harness_env: dict[str, str]) -> None:
    harness = _quick_run(tmp_path, harness_env, launcher=_seccomp("refuse-ptrace"))
    [line] = [line for line in harness.stderr.splitlines() if WARNING in line]
    assert "py-spy may not attach to processes here (a trial dump said: " in line
    # real py-spy's words: the error chain ending in EPERM as root, its own "Permission Denied" line otherwise
    assert "Operation not permitted" in line or "Permission Denied" in line, line
    assert "Fix: add --cap-add SYS_PTRACE to the job container's options" in line
    assert any(line.startswith(f"::warning title={WARNING}::") for line in harness.stdout.splitlines())


def test_a_seccomp_filter_that_allows_ptrace_gives_no_warning(tmp_path: Path, harness_env: dict[str, str]) -> None:
    harness = _quick_run(tmp_path, harness_env, launcher=_seccomp("allow-all"))
    assert WARNING not in harness.stderr


def test_py_spys_own_permission_message_is_understood(tmp_path: Path, harness_env: dict[str, str]) -> None:
    fake = tmp_path / "py-spy"
    fake.write_text(REFUSED_PY_SPY)
    fake.chmod(0o755)
    env = {**harness_env, "GUIDE_GUARD_PY_SPY": str(fake)}
    harness = _quick_run(tmp_path, env, launcher=_seccomp("allow-all"))
    [line] = [line for line in harness.stderr.splitlines() if WARNING in line]
    assert "(a trial dump said: Permission Denied: Try running again with elevated permissions" in line


CAP_SYS_PTRACE = 1 << 19
ALL_CAPS = (1 << 41) - 1


@pytest.mark.parametrize(
    ("scope", "cap_eff", "file_caps", "refused"),
    [
        (None, 0, None, False),  # no Yama: the classic same-user rule, which blocks started by the harness meet
        (0, 0, None, False),
        (1, 0, None, True),  # a container without --cap-add SYS_PTRACE on an Ubuntu host
        (2, 0, None, True),
        (1, CAP_SYS_PTRACE, None, False),
        (2, ALL_CAPS, None, False),
        (3, ALL_CAPS, None, True),  # nothing attaches, whatever the capabilities
        (1, 0, (0x02000001).to_bytes(4, "little") + CAP_SYS_PTRACE.to_bytes(4, "little") + bytes(12), False),
        (1, 0, (0x02000000).to_bytes(4, "little") + CAP_SYS_PTRACE.to_bytes(4, "little") + bytes(12), True),
    ],
)
def test_the_kernels_ptrace_rules(scope: int | None, cap_eff: int, file_caps: bytes | None, refused: bool) -> None:
    why = ptrace_refusal(scope, cap_eff, ALL_CAPS, file_caps)
    assert (why is not None) == refused, why
    if why is not None:
        assert "SYS_PTRACE" in why and "Fix: " in why
