"""Ending what a run started: the teardown and a time-out look again until nothing is left, daemons go with their block.

Every test runs real processes that fight being ended, most of them through
a real harness on a real guide: they ignore SIGTERM and fork while the grace period runs, fork and exit
over and over, or clear their environment and double-fork out of the block's
session. The `test_id` fixture fails a test that leaves a process carrying
its marker; a daemon that cleared its environment carries none, so those tests
look for it by pid themselves, and end it if the harness did not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]

FENCE = "```"


def _running(pid: int, command: list[str]) -> bool:
    """True while `pid` is alive as `command` (not a zombie, not a reused pid)."""
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.cmdline() == command
    return False


@contextlib.contextmanager
def _ended_in_the_end(pidfiles: list[Path], command: list[str]) -> Iterator[None]:
    """Whatever the test found, no process named in `pidfiles` (running `command`) outlives it."""
    try:
        yield
    finally:
        for path in pidfiles:
            for word in path.read_text().split() if path.exists() else []:
                if _running(int(word), command):
                    os.kill(int(word), signal.SIGKILL)


def test_the_teardown_ends_what_a_server_forks_while_it_is_being_ended(guide_runner, tmp_path: Path) -> None:
    """A server that ignores SIGTERM and starts detached sleepers all through the grace period."""
    pids = tmp_path / "pids"
    server = f'trap "" TERM; while :; do setsid sleep 1000 & echo $! >> {pids}; sleep 0.05; done'
    with _ended_in_the_end([pids], ["sleep", "1000"]):
        run = guide_runner(
            f"""
            {FENCE}shell #test-setup id="starts-a-server"
            bash -c '{server}' > /dev/null 2>&1 &
            while [ ! -s {pids} ]; do sleep 0.05; done
            {FENCE}
            """,
            "--grace",
            "1",
        )
        assert run.returncode == 0, run.stdout + run.stderr
        sleepers = [int(word) for word in pids.read_text().split()]
        assert [pid for pid in sleepers if _running(pid, ["sleep", "1000"])] == []
        ended = {p["pid"]: p for p in run.record["guides"][0]["processes_ended"]}
        # listed, those forked during the grace period too; but the last, which its SIGKILL may have
        # caught between fork and setsid, still in the server's group, before any look could see it
        assert set(sleepers[:-1]) <= set(ended)
        assert {p["ended_by"] for p in ended.values()} <= {"SIGTERM", "SIGKILL"}
        assert {p["started_by"] for p in ended.values()} == {"starts-a-server"}
        assert "processes still running at the end of the run, now ended:" in run.stdout


def test_the_teardown_ends_a_process_that_forks_and_exits_over_and_over(guide_runner, tmp_path: Path) -> None:
    """A new pid every 20 ms, SIGTERM ignored: each look at /proc may find it gone, its group it cannot leave."""
    generations = tmp_path / "generations"
    hopper = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "os.setsid()\n"
        "while True:\n"
        f"    with open('{generations}', 'a') as log:\n"
        "        log.write(f'{os.getpid()}\\n')\n"
        "    time.sleep(0.02)\n"
        "    if os.fork():\n"
        "        os._exit(0)\n"
    )
    (tmp_path / "hopper.py").write_text(hopper)
    try:
        run = guide_runner(
            f"""
            {FENCE}shell #test-setup
            {sys.executable} {tmp_path / "hopper.py"} > /dev/null 2>&1 &
            while [ ! -s {generations} ]; do sleep 0.05; done
            {FENCE}
            """,
            "--grace",
            "1",
        )
        assert run.returncode == 0, run.stdout + run.stderr
        # gone for good: no generation is left to write its pid (a look at /proc may miss one, the file not);
        # which generations the looks saw, and so are listed, is chance: the listing is the test above's
        assert not _still_growing(generations), "the hopper still runs"
    finally:  # still writing, its group (every generation's, named by the first) has members: end it
        if generations.exists() and _still_growing(generations):
            os.killpg(int(generations.read_text().split()[0]), signal.SIGKILL)


def _still_growing(path: Path) -> bool:
    """True while the hopper appends to `path` (every 20 ms; half a second is room enough on a busy machine)."""
    written = path.stat().st_size
    time.sleep(0.5)
    return path.stat().st_size != written


def _daemon(pidfile: Path) -> str:
    """A daemon that clears its environment, starts its own session and is orphaned at once; it notes its pid."""
    return (
        f"(env -i setsid sh -c 'echo $$ > {pidfile}; exec sleep 1000' &); while [ ! -s {pidfile} ]; do sleep 0.05; done"
    )


def test_a_daemon_that_cleared_its_environment_is_ended_when_its_block_times_out(guide_runner, tmp_path: Path) -> None:
    earlier, later = tmp_path / "earlier.pid", tmp_path / "later.pid"
    with _ended_in_the_end([earlier, later], ["sleep", "1000"]):
        run = guide_runner(
            f"""
            {FENCE}shell #test-setup id="serves"
            {_daemon(earlier)}
            {FENCE}

            {FENCE}shell #test-setup id="hangs" timeout='1'
            {_daemon(later)}
            sleep 100
            {FENCE}
            """,
            "--grace",
            "1",
        )
        assert run.block("hangs")["status"] == "timed_out"
        served, hung = int(earlier.read_text()), int(later.read_text())
        # ended with its block, named as its block's ...
        at_timeout = {p["pid"]: p for p in run.block("hangs")["processes_ended"]}
        assert at_timeout[hung]["started_by"] == "hangs" and at_timeout[hung]["ended_by"] == "SIGTERM"
        assert f"pid {hung} (SIGTERM): sleep 1000" in run.stdout
        # ... not the earlier block's daemon, which served on until the teardown, named as its own block's
        assert served not in at_timeout
        at_teardown = {p["pid"]: p for p in run.record["guides"][0]["processes_ended"]}
        assert hung not in at_teardown
        assert at_teardown[served]["started_by"] == "serves"
        assert f"pid {served} (from block serves, SIGTERM)" in run.stdout
        assert not _running(served, ["sleep", "1000"]) and not _running(hung, ["sleep", "1000"])


def test_a_diagnostic_leaves_no_daemon_behind(guide_runner, tmp_path: Path) -> None:
    """A diagnostic may not outlive its run, even as a daemon that cleared its environment."""
    pidfile = tmp_path / "diagnostic.pid"
    diagnostic = f"(env -i setsid sh -c 'echo $$ > {pidfile}; exec sleep 1000' &); sleep 0.5"
    with _ended_in_the_end([pidfile], ["sleep", "1000"]):
        run = guide_runner(
            f"""
            ---
            ci:
              diagnostics: ["{diagnostic}"]
            ---

            {FENCE}shell #test-setup
            exit 1
            {FENCE}
            """
        )
        assert run.returncode == 1
        assert run.blocks[0]["diagnostics"][0]["exit_code"] == 0
        daemon = int(pidfile.read_text())
        assert not _running(daemon, ["sleep", "1000"])
        assert daemon not in [p["pid"] for p in run.record["guides"][0]["processes_ended"]]


FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.mark.skipif(not os.access(FREEZER, os.W_OK), reason="needs a writable cgroup v1 freezer (root)")
def test_a_process_that_outlives_sigkill_is_reported_as_still_running(guide_runner, tmp_path: Path) -> None:
    """A frozen process cannot act on any signal, SIGKILL included, until it is thawed: the teardown says so."""
    cgroup = FREEZER / f"guide-guard-test-{os.getpid()}-{tmp_path.name}"
    pidfile = tmp_path / "frozen.pid"
    cgroup.mkdir()
    try:
        run = guide_runner(
            f"""
            {FENCE}shell #test-setup id="freezes"
            sleep 1000 > /dev/null 2>&1 &
            echo $! > {pidfile}
            echo $! > {cgroup}/cgroup.procs
            echo FROZEN > {cgroup}/freezer.state
            {FENCE}
            """,
            "--grace",
            "1",
        )
        assert run.returncode == 0, run.stdout + run.stderr
        frozen = int(pidfile.read_text())
        [listed] = [p for p in run.record["guides"][0]["processes_ended"] if p["pid"] == frozen]
        assert listed["ended_by"] == "still running"
        schema = json.loads((REPO / "docs" / "results.schema.json").read_text(encoding="utf-8"))
        jsonschema.validate(run.record, schema, cls=jsonschema.Draft202012Validator)  # a value of the format
        assert "now ended; 1 of them could not be ended and are still running:" in run.stdout
        assert f"pid {frozen} (from block freezes, still running)" in run.stdout
    finally:  # thawed, it acts on the SIGKILL waiting for it
        (cgroup / "freezer.state").write_text("THAWED")
        with contextlib.suppress(OSError):
            for word in (cgroup / "cgroup.procs").read_text().split():
                os.kill(int(word), signal.SIGKILL)
        for _ in range(100):
            with contextlib.suppress(OSError):
                cgroup.rmdir()
                break
            time.sleep(0.05)


def test_a_tree_the_harness_comes_to_late_after_a_stop_still_gets_its_sigterm_handled(tmp_path: Path) -> None:
    """On a loaded machine the harness may reach a block's tree most of a second after the stop signal (the look
    for its processes is slow): the block still gets half a second from its SIGTERM before SIGKILL, so its trap
    runs, and the stop still ends within the 1.5 s after the signal that its 2 s promise allows."""
    from ci.base.signals import StopSignals
    from ci.process.supervisor import ProcessSupervisor

    term, ready = tmp_path / "term", tmp_path / "ready"
    body = f"trap 'echo TERM >> {term}' TERM\necho $$ > {ready}\nwhile :; do sleep 0.2; done\n"
    signals = StopSignals()
    supervisor = ProcessSupervisor("late-harness", grace_s=600.0, signals=signals)
    with open(tmp_path / "out", "wb") as out:
        block = supervisor.start(
            ["bash", "-c", body],
            env=dict(os.environ),
            stdout=out.fileno(),
            stderr=out.fileno(),
            block_name="stubborn",
            block_tag="stubborn",
        )
    deadline = time.monotonic() + 30
    while not ready.exists() or not ready.read_text().strip():
        assert time.monotonic() < deadline, "the block never started"
        time.sleep(0.01)
    signals(signal.SIGTERM, None)
    assert signals.first_at is not None
    signals.first_at -= 1.0  # the signal came a second ago: the harness comes to the tree late
    ended = supervisor.end_tree(block)
    assert "TERM" in term.read_text(), "asked first, and given the time to hear it"
    assert [process.ended_by for process in ended if process.pid == block.pid] == ["SIGKILL"]
    assert not _running(block.pid, ["bash"])
