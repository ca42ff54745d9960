"""What a user can rely on of processes and signals (docs/guarantees.md, section 1): nothing outlives the run, every
signal that would kill the harness ends the run with its reports, a full console never holds up a stop, an
interrupt before the run is one line, and every block starts in the working directory as it now is.

Every test starts a real harness (`python -m ci.run`) on a real guide. "Ends" is tested by making the slow
path impossible (a grace period of 600 s against a test limit of 60 s), and whether a process is gone by a
lock it holds (free once every process holding it has exited), never by timing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from waiting import wait_for

FENCE = "```"
LIMIT_S = 60  # far above what any of these runs needs, far below a grace period of 600 s


def _start(tmp_path: Path, env: dict[str, str], guide: str, *args: str, **popen: Any) -> subprocess.Popen[bytes]:
    """The harness on GUIDE, in the background, its reports in tmp_path/out."""
    path = tmp_path / "guide.md"
    path.write_text(guide, encoding="utf-8")
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    argv = [sys.executable, "-m", "ci.run", str(path), "--output-dir", str(tmp_path / "out"), *args]
    return subprocess.Popen(argv, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, **popen)


def _finish(harness: subprocess.Popen[bytes]) -> int:
    try:
        return harness.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        harness.kill()
        harness.wait()
        raise AssertionError(f"the harness was still running {LIMIT_S} s later") from None


def _record(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))


# -- a daemon that forks into a new session at every step -----------------------------------------------

# Every generation holds the lock (one open file, inherited at fork), ignores SIGTERM, forks, exits, and
# starts a session of its own: a new pid, group and session about a thousand times a second. It stops
# by itself once the stop file exists, which is how the test cleans up whatever happened.
HOPPER = """
import fcntl, os, signal, sys
lock_path, ready, stop = sys.argv[1:4]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
lock = open(lock_path, "w")
fcntl.flock(lock, fcntl.LOCK_EX)
open(ready, "w").close()
while not os.path.exists(stop):
    if os.fork():
        os._exit(0)
    os.setsid()
"""


@contextlib.contextmanager
def _hopper_stopped_in_the_end(lock: Path, stop: Path) -> Iterator[None]:
    """Whatever the test found, no generation of the hopper outlives it."""
    try:
        yield
    finally:
        stop.touch()
        if lock.exists():
            descriptor = os.open(lock, os.O_RDONLY)
            try:
                wait_for(lambda: _free(descriptor), "the hopper to stop at its stop file")
            finally:
                os.close(descriptor)


def _free(descriptor: int) -> bool:
    """True when no process holds the lock: every generation of the hopper is gone."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(descriptor, fcntl.LOCK_UN)
    return True


def test_a_daemon_that_forks_into_a_new_session_at_every_step_is_ended(guide_runner, tmp_path: Path) -> None:
    lock, ready, stop = tmp_path / "hopper.lock", tmp_path / "ready", tmp_path / "stop"
    (tmp_path / "hopper.py").write_text(HOPPER)
    with _hopper_stopped_in_the_end(lock, stop):
        run = guide_runner(
            f"""
            {FENCE}shell #test-setup id="hops"
            {sys.executable} {tmp_path / "hopper.py"} {lock} {ready} {stop} > /dev/null 2>&1 &
            while [ ! -e {ready} ]; do sleep 0.05; done
            {FENCE}
            """,
            "--grace",
            "1",
        )
        assert run.returncode == 0, run.stdout + run.stderr
        descriptor = os.open(lock, os.O_RDONLY)
        try:
            assert _free(descriptor), "the hopper outlived the run"
        finally:
            os.close(descriptor)
        ended = run.record["guides"][0]["processes_ended"]
        assert ended and {p["ended_by"] for p in ended} <= {"SIGTERM", "SIGKILL"}
        assert {p["started_by"] for p in ended} == {"hops"}
        assert "processes still running at the end of the run, now ended:" in run.stdout


# -- every signal that would kill the harness --------------------------------------------------------


def _serving_guide(server_pid: Path) -> str:
    return (
        f'{FENCE}shell #test-setup id="long"\nsleep 300 &\necho $! > {server_pid}\nsleep 300\n{FENCE}\n\n'
        f'{FENCE}shell #test-setup id="after"\necho never\n{FENCE}\n'
    )


@pytest.mark.parametrize(
    ("signum", "name"),
    [(signal.SIGQUIT, "SIGQUIT"), (signal.SIGRTMIN + 2, "SIGRTMIN+2")],  # the first and the last kind (STOP_SIGNALS)
    ids=["SIGQUIT", "SIGRTMIN+2"],
)
def test_a_signal_that_would_kill_the_harness_ends_the_run_as_sigterm_does(
    tmp_path: Path, harness_env: dict[str, str], signum: int, name: str
) -> None:
    server_pid = tmp_path / "server.pid"
    harness = _start(tmp_path, harness_env, _serving_guide(server_pid), "--grace", "600")
    wait_for(lambda: server_pid.exists() and bool(server_pid.read_text().strip()), "the block to start")
    harness.send_signal(signum)
    assert _finish(harness) == 128 + signum
    record = _record(tmp_path)
    assert record["exit_status"] == 128 + signum
    assert [b["status"] for b in record["blocks"]] == ["error", "not_run"]
    assert f"interrupted by {name}" in record["blocks"][0]["message"]
    assert not psutil.pid_exists(int(server_pid.read_text())) or (
        psutil.Process(int(server_pid.read_text())).status() == psutil.STATUS_ZOMBIE
    )


def test_a_block_or_a_diagnostic_killed_by_a_signal_is_said_to_be_by_its_name(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          diagnostics: ["kill -TERM $$"]
        ---
        {FENCE}shell #test-setup id="killed"
        kill -KILL $$
        {FENCE}
        """,
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    block = run.block("killed")
    assert (block["status"], block["exit_code"], block["message"]) == ("failed", -9, "killed by SIGKILL")
    assert block["diagnostics"][0]["message"] == "killed by SIGTERM"
    assert "guide.md:5: killed by SIGKILL\n" in run.stdout  # the recap
    assert "(killed by SIGTERM, 0 B in" in run.stdout  # the diagnostic's header
    assert 'message="failed: killed by SIGKILL"' in (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert "by signal" not in run.stdout


def test_ctrl_z_does_not_suspend_a_run_and_blocks_get_it_back(tmp_path: Path, harness_env: dict[str, str]) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    guide = (
        f"{FENCE}shell #test-setup\ntouch {ready}\nwhile [ ! -e {go} ]; do sleep 0.05; done\n{FENCE}\n\n"
        f'{FENCE}python #test id="disposition"\nimport signal\nprint(["ignored", "default"][signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL])\n{FENCE}\n\n'
        f'{FENCE}text #test-result id="disposition"\ndefault\n{FENCE}\n'
    )
    harness = _start(tmp_path, harness_env, guide)
    try:
        wait_for(ready.exists, "the block to start")
        for signum in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            harness.send_signal(signum)  # a harness they stopped would stay stopped, and never finish
        go.touch()
        assert _finish(harness) == 0
    finally:
        if harness.poll() is None:
            harness.send_signal(signal.SIGCONT)
            harness.kill()
            harness.wait()
    assert [b["status"] for b in _record(tmp_path)["blocks"]] == ["passed", "passed"]


# -- a console nobody reads ------------------------------------------------------------------------


def test_a_stop_is_not_held_up_by_a_console_nobody_reads(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """--stream copies 3 MB to a pipe of 64 KiB that nobody reads: the harness waits in a write as the signal comes."""
    ready = tmp_path / "ready"
    guide = (
        f'{FENCE}shell #test-setup id="loud"\nhead -c 3000000 /dev/zero | tr "\\0" x | fold -w 100\n'
        f"touch {ready}\nsleep 300\n{FENCE}\n"
    )
    harness = _start(tmp_path, harness_env, guide, "--stream", "--grace", "600", stdout=subprocess.PIPE)
    try:
        wait_for(ready.exists, "the block to have written it all")
        harness.send_signal(signal.SIGTERM)
        assert _finish(harness) == 143
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        assert harness.stdout is not None
        harness.stdout.close()
    record = _record(tmp_path)
    assert record["exit_status"] == 143 and record["blocks"][0]["status"] == "error"


# -- an interrupt before the run -------------------------------------------------------------------


def _threads(pid: int) -> set[int]:
    return {int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()}


def _threads_blocking(pid: int, signum: int) -> set[int]:
    """The threads of process PID that block SIGNUM (their SigBlk mask, /proc/PID/task/TID/status)."""
    blocking = set()
    for tid in _threads(pid):
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text(encoding="ascii")
        mask = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
        if mask >> (signum - 1) & 1:
            blocking.add(tid)
    return blocking


def _accept_from(server: socket.socket, pid: int) -> socket.socket:
    """The connection the process PID made to SERVER; any other is closed.

    The server's port is an ephemeral one, which may be a port another test chose a moment ago for a server of its
    own (its readiness probe then connects here): only the harness's own connection says it is reading the guide.
    """
    while True:
        connection, peer = server.accept()
        process = psutil.Process(pid)
        made = getattr(process, "net_connections", None) or process.connections  # psutil < 6 has only the latter
        if any(tuple(ours.laddr) == peer for ours in made(kind="tcp")):
            return connection
        connection.close()


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _default_sigint() -> None:  # whatever the suite itself was started with
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("signum", "args", "started_as"),
    [
        (signal.SIGINT, (), signal.SIG_DFL),
        # a background job of a shell without job control (a CI script's `cmd &`) starts with SIGINT ignored
        (signal.SIGINT, (), signal.SIG_IGN),
        (signal.SIGTERM, ("--list",), signal.SIG_DFL),
    ],
    ids=["SIGINT", "SIGINT-ignored-at-start", "SIGTERM-list"],
)
def test_an_interrupt_while_a_guide_is_fetched_is_one_line(
    tmp_path: Path, harness_env: dict[str, str], signum: int, args: tuple[str, ...], started_as: object
) -> None:
    """The guide's server takes the connection and never answers: the harness is reading it as the signal comes."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/guide.md"
        harness = subprocess.Popen(
            [sys.executable, "-m", "ci.run", url, "--output-dir", str(tmp_path / "out"), *args],
            cwd=tmp_path,
            env=harness_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_ignoring_sigint if started_as == signal.SIG_IGN else _default_sigint,
        )
        try:
            connection = _accept_from(server, harness.pid)
            with connection:
                # the kernel gives a signal sent to the process to any thread not blocking it: only the main
                # thread, waiting for the one that reads, can act on it at once
                assert _threads(harness.pid) - {harness.pid} <= _threads_blocking(harness.pid, signum)
                harness.send_signal(signum)
                stdout, stderr = harness.communicate(timeout=LIMIT_S)
        finally:
            if harness.poll() is None:
                harness.kill()
                harness.communicate()
    assert harness.returncode == 128 + signum
    assert (stdout, stderr) == ("", f"[ERROR] interrupted by {signal.Signals(signum).name}\n")


# -- the working directory -------------------------------------------------------------------------


def test_a_block_that_removes_and_remakes_the_working_directory(guide_runner, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup id="remakes"
        cd .. && rm -rf work && mkdir work
        {FENCE}

        {FENCE}shell #test-setup id="writes-there"
        echo made > made-here
        {FENCE}

        {FENCE}shell #test-setup id="removes"
        rm -rf "$PWD"
        {FENCE}

        {FENCE}shell #test-setup id="after"
        echo never
        {FENCE}
        """,
        "--workdir",
        str(workdir),
    )
    assert run.statuses() == {"remakes": "passed", "writes-there": "passed", "removes": "passed", "after": "error"}
    assert (tmp_path / "made-here").exists() is False
    assert run.block("after")["message"] == (
        f"could not be run: cannot enter the working directory {workdir} (No such file or directory); was it removed?"
    )
    # the file went where the second block ran, which the third removed: seen in its record, not on disk
    assert run.block("writes-there")["exit_code"] == 0
