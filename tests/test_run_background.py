"""What blocks leave running: a time-out ends the block's whole tree, background servers serve later blocks and
are ended at the end, daemons and orphans are found, and nothing a block left holding its output stalls it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

FENCE = "```"


def test_timeout_ends_the_whole_tree_and_keeps_partial_output(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup timeout='1'
        sleep 300 &
        echo $! > {pidfile}
        echo "partial output"
        sleep 300; echo "never printed"
        {FENCE}

        {FENCE}shell #test-setup store="after"
        echo after
        {FENCE}
        """,
        "--grace",
        "1",
    )
    assert run.returncode == 1
    first = run.blocks[0]
    assert first["status"] == "timed_out"
    assert first["exit_code"] is None
    assert run.blocks[1]["status"] == "not_run"
    assert "partial output" in (run.output_dir / first["stdout_path"]).read_text()
    assert "timed out after 1s" in run.stdout
    child = int(pidfile.read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    # what the timeout ended is listed, the block's own shell first, then its background child
    ended = first["processes_ended"]
    assert ended[0]["command"].startswith("bash -c") and ended[0]["started_by"] == "#1"
    assert child in [p["pid"] for p in ended]
    assert all(p["ended_by"] in ("SIGTERM", "SIGKILL") for p in ended)
    assert f"--- processes ended ({len(ended)})" in run.stdout and f"pid {child} (SIGTERM): sleep 300" in run.stdout
    assert run.blocks[1]["processes_ended"] == []


def test_ignoring_sigterm_does_not_stop_the_kill(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "stubborn.pid"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup timeout='1'
        bash -c 'trap "" TERM; echo $$ > {pidfile}; while true; do sleep 0.1; done'
        {FENCE}
        """,
        "--grace",
        "1",
    )
    assert run.block("1")["status"] == "timed_out"
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid)


def test_timed_out_python_gets_a_stack_dump_naming_the_function(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}python #test-setup timeout='2'
        import time

        def waiting_for_the_capture_server():
            while True:
                time.sleep(0.1)

        waiting_for_the_capture_server()
        {FENCE}
        """,
        "--grace",
        "1",
    )
    block = run.block("1")
    assert block["status"] == "timed_out"
    dumps = [run.output_dir / p for p in block["stack_dumps"]]
    assert dumps, f"no stack dump taken: {block['stack_dump_notes']}"
    assert "waiting_for_the_capture_server" in dumps[0].read_text()
    assert "waiting_for_the_capture_server" in run.stdout  # shown in the log too


# A server started by an earlier block, stuck in its own code: it never accepts the connection a later block
# waits on. It says it is ready from inside the function a stack dump must show, so it is there before that block starts.
STUCK_SERVER = """
import pathlib, socket, sys, time

def waiting_for_the_model_to_load(ready):
    ready.write_text(str(listening.getsockname()[1]))
    while True:
        time.sleep(0.1)

listening = socket.socket()
listening.bind(("127.0.0.1", 0))
listening.listen()
waiting_for_the_model_to_load(pathlib.Path(sys.argv[1]))
"""


def test_a_time_out_dumps_the_stack_of_the_server_an_earlier_block_left_running(guide_runner, tmp_path: Path) -> None:
    """Issue 36: a request hung in a server started by an earlier block; the dump of the waiting client alone
    (here a shell, not even Python) said nothing. The server's stack is dumped too, and the log names what was not."""
    server, port, pids = tmp_path / "server.py", tmp_path / "port", tmp_path / "pids"
    server.write_text(STUCK_SERVER)
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup id="serve"
        nohup {sys.executable} {server} {port} >/dev/null 2>&1 &
        echo "server $!" > {pids}
        nohup sleep 300 >/dev/null 2>&1 &
        echo "sleep $!" >> {pids}
        while [ ! -s {port} ]; do sleep 0.05; done
        {FENCE}

        {FENCE}shell #test id="ask" timeout='2'
        exec 3<>"/dev/tcp/127.0.0.1/$(cat {port})"
        printf 'GET /v1/models HTTP/1.0\\r\\n\\r\\n' >&3
        cat <&3
        {FENCE}

        {FENCE}shell #test-result id="ask"
        ...
        {FENCE}
        """,
        "--grace",
        "1",
        env={"NO_COLOR": "1"},
    )
    ask = run.block("ask")
    assert ask["status"] == "timed_out", run.stdout
    started = dict(line.split() for line in pids.read_text().splitlines())
    server_pid, sleep_pid = int(started["server"]), int(started["sleep"])
    dumps = {Path(path).name: (run.output_dir / path).read_text() for path in ask["stack_dumps"]}
    assert f"pid-{server_pid}.txt" in dumps, ask["stack_dump_notes"]
    assert "waiting_for_the_model_to_load" in dumps[f"pid-{server_pid}.txt"]
    assert ask["stack_dump_notes"] == [
        f"stack dump of pid {server_pid} (left running by block serve) taken too, in pid-{server_pid}.txt:"
        " this block may have waited on it",
        f"pid {sleep_pid} (sleep 300), left running by block serve, not dumped: not a Python process"
        " (py-spy dumps Python only)",
    ]
    # the log shows the server's stack and says which background process was not dumped, and why
    log = run.stdout
    assert f"--- stack dump pid-{server_pid}.txt\n" in log and "waiting_for_the_model_to_load (" in log
    assert "--- stack dumps\n" + "\n".join(ask["stack_dump_notes"]) + "\n" in log
    # dumped, not ended: the server is the earlier block's, ended with the guide as any process left running
    assert ask["processes_ended"] and server_pid not in [p["pid"] for p in ask["processes_ended"]]
    assert server_pid in [p["pid"] for p in run.record["guides"][0]["processes_ended"]]


def test_background_server_serves_later_blocks_and_is_ended_at_the_end(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        nohup sleep 300 >/dev/null 2>&1 &
        echo $! > {pidfile}
        until [ "$(cat /proc/$!/comm)" = sleep ]; do sleep 0.01; done  # nohup has become sleep: the name to check
        {FENCE}

        {FENCE}shell #test id="still-up"
        kill -0 "$(cat {pidfile})" && echo alive
        {FENCE}

        {FENCE}shell #test-result id="still-up"
        alive
        {FENCE}
        """,
        timeout_s=60,
    )
    assert run.returncode == 0, run.stdout
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid)
    ended = run.record["guides"][0]["processes_ended"]
    assert [p["pid"] for p in ended] == [pid]
    assert ended[0]["command"].startswith("sleep 300")
    assert ended[0]["started_by"] == "#1"
    assert "now ended" in run.stdout and "sleep 300" in run.stdout


def test_daemon_that_double_forks_and_calls_setsid_is_found(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    run = guide_runner(
        f"""
        {FENCE}python #test-setup
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open("{pidfile}", "w").write(str(os.getpid()))
                os.closerange(0, 3)
                time.sleep(300)
            os._exit(0)
        os.wait()
        while not os.path.exists("{pidfile}") or not open("{pidfile}").read():
            time.sleep(0.05)
        {FENCE}
        """,
        timeout_s=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid)
    assert pid in [p["pid"] for p in run.record["guides"][0]["processes_ended"]]


def test_background_child_holding_stdout_never_stalls_the_block(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="bg"
        (sleep 300; echo late) &
        echo "started"
        {FENCE}

        {FENCE}shell #test-result id="bg"
        started
        {FENCE}
        """,
        timeout_s=60,
    )
    assert run.returncode == 0, run.stdout
    assert run.block("bg")["status"] == "passed"


RUN_ONE_GUIDE = """
import json
import sys
from pathlib import Path

from ci.guide.parse import parse_guide
from ci.guide.plan import build_plan
from ci.runner.execute import RunOptions, run_guide
from ci.process.supervisor import ProcessSupervisor


class Quiet:
    def block_started(self, *args):
        pass

    def block_retrying(self, *args):
        pass

    def block_ending(self, *args):
        pass

    def block_finished(self, *args):
        pass


guide, workdir, output_dir = sys.argv[1:]
plan = build_plan(parse_guide(Path(guide).read_text(), guide))
options = RunOptions(workdir=workdir, output_dir=Path(output_dir), preset={}, error_markers=(), keep_going=False)
supervisor = ProcessSupervisor("one-guide", grace_s=5.0)
outcome = run_guide(plan, left_out={}, options=options, supervisor=supervisor, listener=Quiet())
print(json.dumps({
    "statuses": [result.status.value for result in outcome.results],
    "leftovers": [process.command for process in outcome.leftovers],
    "collected": [entry.source for entry in outcome.collection.files] if outcome.collection else None,
}))
"""


def test_run_guide_alone_ends_what_the_guide_left_running_and_collects_its_files(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    # the runner used without ci.run's command line: its outcome is finished, nothing left for a caller to do
    pidfile = tmp_path / "server.pid"
    guide = tmp_path / "guide.md"
    guide.write_text(
        f"---\nci:\n  collect: [server.log]\n---\n\n"
        # the log exists before the server is forked: teardown may end it before it opens its redirection
        f"{FENCE}shell #test-setup\necho starting > server.log\nsleep 300 >> server.log &\necho $! > {pidfile}\n{FENCE}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONE_GUIDE, str(guide), str(tmp_path), str(tmp_path / "out")],
        env=harness_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["statuses"] == ["passed"]
    # one process, seen as `sleep 300` once it has exec()ed, or as the shell forked to run it just before
    [leftover] = outcome["leftovers"]
    assert "sleep 300" in leftover
    assert outcome["collected"] == [str(tmp_path / "server.log")]
    server = int(pidfile.read_text())
    assert not psutil.pid_exists(server) or psutil.Process(server).status() == "zombie"


def test_orphans_are_reaped_not_left_as_zombies(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        (sleep 0.3 & echo $! > {pidfile})
        {FENCE}

        {FENCE}shell #test-setup
        sleep 1.5
        pid=$(cat {pidfile})
        if [ -e /proc/$pid ]; then grep State /proc/$pid/status; else echo "reaped"; fi
        {FENCE}
        """
    )
    assert run.returncode == 0
    out = (run.output_dir / run.blocks[1]["stdout_path"]).read_text()
    assert out.strip() == "reaped", out
