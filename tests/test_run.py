"""The runner end to end, with real processes: statuses, stores, timeouts, background work, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

FENCE = "```"


def test_store_load_and_wildcards_pass(guide_runner) -> None:
    run = guide_runner(
        f"""
        # Demo
        {FENCE}shell #test-setup store="who"
        echo "world  "
        {FENCE}

        {FENCE}shell #test id="greet" load="who>>NAME"
        echo "hello <NAME>"
        echo "pid $$"
        {FENCE}

        {FENCE}shell #test-result id="greet"
        hello world
        pid ...
        {FENCE}
        """,
        "-v",  # a passing block's sections, shown with --verbose
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.statuses() == {"who": "passed", "greet": "passed"}
    assert run.block("who")["captured"] == {"who": "world"}
    assert "stored who (5 bytes)" in run.stdout  # trailing whitespace removed
    greet = run.block("greet")
    assert greet["exit_code"] == 0
    assert greet["line"] == 6
    assert len(greet["code_sha256"]) == 64
    assert (run.output_dir / greet["stdout_path"]).read_text().startswith("hello world\n")


def test_failed_block_stops_the_run_and_shows_stderr(guide_runner) -> None:
    text = f"""
        {FENCE}shell #test-setup
        echo "about to fail"; echo "boom on stderr" >&2; exit 3
        {FENCE}

        {FENCE}shell #test-setup store="later"
        echo never
        {FENCE}
        """
    run = guide_runner(text)
    assert run.returncode == 1
    assert [b["status"] for b in run.blocks] == ["failed", "not_run"]
    assert run.blocks[0]["exit_code"] == 3
    assert "boom on stderr" in run.stdout
    assert "[ERROR] [1/2]" in run.stdout and "exit 3" in run.stdout

    keep_going = guide_runner(text, "--keep-going")
    assert keep_going.returncode == 1
    assert [b["status"] for b in keep_going.blocks] == ["failed", "passed"]


def test_mismatch_reports_diff_and_first_unmatched_line(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="versions"
        printf 'alpha 1\\nbeta 2\\ngamma 3\\n'
        {FENCE}

        {FENCE}shell #test-result id="versions" fuzzy='N'
        alpha N
        beta 3
        gamma N
        {FENCE}
        """
    )
    assert run.returncode == 1
    block = run.block("versions")
    assert block["status"] == "mismatch"
    assert block["first_unmatched_line"] == 2
    # the lines its wildcards match are no change: the hunk sets only `beta` against `beta`
    assert "\n@@ -1,3 +1,3 @@\n alpha 1\n-beta 3\n+beta 2\n gamma 3\n" in run.stdout
    assert "from its line 2: 'beta 3'" in run.stdout


def test_stdout_only_is_matched_and_trailing_newlines_are_allowed(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}bash #test id="t"
        echo "noise" >&2; printf 'out\\n\\n\\n'
        {FENCE}

        {FENCE}shell #test-result id="t"
        out
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout
    assert run.block("t")["status"] == "passed"


def test_python_blocks_empty_stdin_and_fresh_processes(guide_runner, tmp_path: Path) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        cd /; export LEAK=yes
        {FENCE}

        {FENCE}python #test id="py"
        import os, sys
        print(repr(sys.stdin.read()))
        print(os.getcwd() == os.environ["EXPECTED_CWD"], os.environ.get("LEAK"))
        {FENCE}

        {FENCE}shell #test-result id="py"
        ''
        True None
        {FENCE}
        """,
        env={"EXPECTED_CWD": str(tmp_path)},
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_workdir_and_front_matter_env(guide_runner, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run = guide_runner(
        f"""
        ---
        ci:
          env:
            GREETING: "from front matter"
        ---
        {FENCE}shell #test id="where"
        basename "$PWD"; echo "$GREETING"
        {FENCE}

        {FENCE}shell #test-result id="where" disable_fuzzy
        work
        from front matter
        {FENCE}
        """,
        "--workdir",
        str(work),
    )
    assert run.returncode == 0, run.stdout


def test_python_blocks_see_the_workdir_as_pwd(guide_runner, tmp_path: Path) -> None:
    """PWD names the block's directory, as after a shell's `cd` (a python found on PATH has no shell to fix it)."""
    work, tools = tmp_path / "work", tmp_path / "tools"
    work.mkdir()
    tools.mkdir()
    (tools / "python").symlink_to(sys.executable)  # a real interpreter first on PATH, not a wrapper script
    run = guide_runner(
        f"""
        ---
        ci:
          env:
            PATH: "{tools}:{os.environ["PATH"]}"
        ---
        {FENCE}python #test id="where"
        import os, sys
        print(os.path.basename(os.environ["PWD"]), os.path.samefile(os.environ["PWD"], "."), sys.executable)
        {FENCE}

        {FENCE}shell #test-result id="where" disable_fuzzy
        work True {tools / "python"}
        {FENCE}
        """,
        "--workdir",
        str(work),
    )
    assert run.returncode == 0, run.stdout

    # started from a directory reached through a symbolic link: PWD keeps the path as the user typed it
    alias = tmp_path / "alias"
    alias.symlink_to(tmp_path, target_is_directory=True)
    text = f"""
        {FENCE}python #test-setup store="pwd"
        import os
        print(os.environ["PWD"])
        {FENCE}
        """
    run = guide_runner(text, env={"PWD": str(alias)})
    assert run.block("pwd")["captured"] == {"pwd": str(alias)}


def test_a_guide_path_decides_which_bash_runs_its_blocks(guide_runner, tmp_path: Path) -> None:
    """The block's PATH (here set by the guide) is searched, not only the harness's own."""
    tools = tmp_path / "tools"
    tools.mkdir()
    fake_bash = tools / "bash"
    fake_bash.write_text('#!/bin/sh\necho "simulated bash, given: $2"\n', encoding="utf-8")
    fake_bash.chmod(0o755)
    text = f"""
        ---
        ci:
          env:
            PATH: "{{path}}"
        ---
        {FENCE}shell #test id="which"
        echo real
        {FENCE}

        {FENCE}shell #test-result id="which"
        simulated bash, given: echo real
        {FENCE}
        """
    run = guide_runner(text.replace("{path}", f"{tools}:{os.environ['PATH']}"))
    assert run.returncode == 0, run.stdout

    empty = tmp_path / "empty"
    empty.mkdir()
    missing = guide_runner(text.replace("{path}", str(empty)))
    assert missing.returncode == 1
    assert missing.block("which")["status"] == "error"
    assert "could not be run: no bash on PATH" in missing.stdout


def test_output_files_hold_what_blocks_printed_and_nothing_else(guide_runner) -> None:
    """An empty stream keeps no file; blocks that never ran leave none; a late writer's file is kept."""
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="quiet"
        true
        {FENCE}

        {FENCE}shell #test-setup store="both"
        echo out; echo err >&2
        {FENCE}

        {FENCE}shell #test-setup store="late"
        (sleep 2; echo "written after the block ended" >&2; touch late-done) &
        {FENCE}

        {FENCE}shell #test-setup store="skipped" skip="not today"
        echo never
        {FENCE}

        {FENCE}shell #test-setup store="fails"
        for i in $(seq 300); do [ -e late-done ] && break; sleep 0.1; done; exit 4
        {FENCE}

        {FENCE}shell #test-setup store="after"
        echo never either
        {FENCE}
        """
    )
    assert run.returncode == 1, run.stdout
    quiet, both, late = run.block("quiet"), run.block("both"), run.block("late")
    assert (quiet["stdout_path"], quiet["stderr_path"]) == (None, None)
    assert (run.output_dir / both["stdout_path"]).read_text() == "out\n"
    assert (run.output_dir / both["stderr_path"]).read_text() == "err\n"
    # the background writer still held stderr when the block ended, so its file was kept for it
    assert (run.output_dir / late["stderr_path"]).read_text() == "written after the block ended\n"
    files = sorted(path.name for path in (run.output_dir / "blocks").iterdir())
    assert files == [
        "002-both.stderr.txt",
        "002-both.stdout.txt",
        "003-late.stderr.txt",
        "003-late.stdout.txt",  # empty, but its writer was still alive when the block ended
    ]
    assert [b["status"] for b in run.blocks[3:]] == ["skipped", "failed", "not_run"]


def test_blocks_get_the_signals_python_ignores_back(guide_runner) -> None:
    """A writer into a closed pipe ends on SIGPIPE, as in a terminal: no "Broken pipe" error, status 141."""
    run = guide_runner(
        f"""
        {FENCE}shell #test id="pipe"
        yes | head -1; echo "${{PIPESTATUS[@]}}"
        {FENCE}

        {FENCE}shell #test-result id="pipe" disable_fuzzy
        y
        141 0
        {FENCE}
        """
    )
    assert run.returncode == 0, run.stdout
    assert run.block("pipe")["stderr_path"] is None  # nothing on stderr


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


def test_background_server_serves_later_blocks_and_is_ended_at_the_end(guide_runner, tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        nohup sleep 300 >/dev/null 2>&1 &
        echo $! > {pidfile}
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


def test_a_stored_value_with_a_nul_byte_fails_the_block_that_loads_it_and_the_run_goes_on(
    guide_runner, tmp_path: Path
) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="TOKENISH"
        printf 'abc\\0def'
        {FENCE}

        {FENCE}shell #test-setup id="uses-it" load="TOKENISH>>VALUE"
        echo "<VALUE>"
        {FENCE}

        {FENCE}shell #test-setup id="after"
        echo still here
        {FENCE}
        """,
        "--keep-going",
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    uses_it = run.block("uses-it")
    assert uses_it["status"] == "error"
    assert "the stored value of TOKENISH holds a NUL byte" in uses_it["message"]
    assert run.block("after")["status"] == "passed"
    assert "<testsuite" in (tmp_path / "junit.xml").read_text()


def test_unicode_garbage_nul_and_ansi_do_not_break_the_reports(guide_runner, tmp_path: Path) -> None:
    import junitparser

    run = guide_runner(
        f"""
        {FENCE}shell #test id="noise"
        printf 'caf\\xc3\\xa9 \\xff\\xfe bad\\x00nul \\033[31mred\\033[0m\\n'
        printf 'Traceback (most recent call last)\\n\\x00\\xff' >&2
        exit 1
        {FENCE}

        {FENCE}shell #test-result id="noise"
        café
        {FENCE}
        """,
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert run.returncode == 1
    assert "café \ufffd\ufffd badnul red" in run.stdout
    assert "\x1b" not in run.stdout and "\x00" not in run.stdout
    record = json.loads((run.output_dir / "results.json").read_text())
    assert record["blocks"][0]["status"] == "failed"
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == 1
    assert "\x1b" not in (tmp_path / "junit.xml").read_text()


def test_error_markers_show_stderr_of_a_passing_block(guide_runner) -> None:
    run = guide_runner(
        f"""
        ---
        ci:
          error_markers: [ERR99999]
        ---
        {FENCE}shell #test-setup
        echo "EZ9999: ERR99999 device error" >&2; echo fine
        {FENCE}

        {FENCE}shell #test-setup
        echo "quiet warning" >&2; echo fine
        {FENCE}
        """
    )
    assert run.returncode == 0
    assert "EZ9999: ERR99999 device error" in run.stdout
    assert "contains 'ERR99999'" in run.stdout
    assert "quiet warning" not in run.stdout
    assert run.blocks[0]["error_marker"] == "ERR99999"


def test_selection_by_only_from_until(guide_runner) -> None:
    guide = "\n".join(f'{FENCE}shell #test-setup id="s{i}"\necho {i}\n{FENCE}\n' for i in range(1, 6))
    run = guide_runner(guide, "--only", "s2,4")
    assert [b["status"] for b in run.blocks] == ["not_run", "passed", "not_run", "passed", "not_run"]
    run = guide_runner(guide, "--from", "s2", "--until", "3")
    assert [b["status"] for b in run.blocks] == ["not_run", "passed", "passed", "not_run", "not_run"]
    bad = guide_runner(guide, "--only", "nope")
    assert bad.returncode == 2
    assert "--only 'nope' names no block" in bad.stderr
    assert bad.stdout == ""


def test_load_of_a_value_never_stored_at_run_time_is_an_error(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="path" skip="no data here"
        echo /data
        {FENCE}

        {FENCE}shell #test id="use" load="path>>P"
        echo <P>
        {FENCE}

        {FENCE}shell #test-result id="use"
        /data
        {FENCE}
        """,
    )
    assert run.returncode == 1
    assert run.block("use")["status"] == "error"
    assert "path was never stored" in run.stdout


NEEDS_A_SETUP = f"""
    {FENCE}shell #test-setup store="path"
    echo /data
    {FENCE}

    {FENCE}shell #test id="use" load="path>>P"
    echo <P>
    {FENCE}

    {FENCE}shell #test-result id="use"
    /data
    {FENCE}
    """


def test_a_selection_that_leaves_out_a_needed_setup_is_refused_before_anything_runs(guide_runner) -> None:
    run = guide_runner(NEEDS_A_SETUP, "--only", "use")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == (
        f"[ERROR] {run.guide}:5: #test id=use loads 'path', which #test-setup store=path at {run.guide}:1 stores, "
        "but --only leaves it out: pass --set path=VALUE, or add --only path to run it too\n"
        "[ERROR] 1 document error; nothing was run\n"
    )
    run = guide_runner(NEEDS_A_SETUP, "--from", "use")
    assert run.returncode == 2
    assert "but --from use starts after it: pass --set path=VALUE, or start there: --from path" in run.stderr


def test_a_selection_runs_when_set_gives_the_value_or_the_setup_is_added(guide_runner) -> None:
    run = guide_runner(NEEDS_A_SETUP, "--only", "use", "--set", "path=/data")
    assert (run.returncode, run.block("use")["status"]) == (0, "passed")
    run = guide_runner(NEEDS_A_SETUP, "--only", "use", "--only", "path")
    assert (run.returncode, run.block("use")["status"]) == (0, "passed")


def test_set_pre_stores_a_value(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test id="ref" load="upstream_ref>>ref"
        echo "checkout <ref>"
        {FENCE}

        {FENCE}shell #test-result id="ref"
        checkout v1.2.3
        {FENCE}
        """,
        "--set",
        "upstream_ref=v1.2.3",
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_skip_parameter_reports_skipped(guide_runner, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup skip='needs an NPU'
        exit 1
        {FENCE}
        """,
        "--junit",
        str(junit),
    )
    assert run.returncode == 0
    assert run.blocks[0]["status"] == "skipped"
    assert run.blocks[0]["message"] == "needs an NPU"
    assert "<skipped" in junit.read_text()


def test_unusable_output_places_are_refused_before_anything_runs(guide_runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"""
        {FENCE}shell #test-setup
        touch {marker}
        {FENCE}
        """
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for args, says in [
        (("--junit", str(tmp_path)), "is a directory; name a file"),
        (("--junit", f"{a_file}/junit.xml"), "is a file, not a directory"),
    ]:
        run = guide_runner(text, *args)
        assert run.returncode == 2, run.stderr
        assert says in run.stderr and "[ERROR] --junit" in run.stderr
        assert not marker.exists()


def test_a_report_that_cannot_be_written_does_not_cost_the_verdict(guide_runner, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        rm -r {reports} && touch {reports}  # the JUnit report's directory goes away while the run is on
        {FENCE}
        """,
        "--junit",
        str(reports / "junit.xml"),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"[ERROR] could not write the JUnit report to {reports / 'junit.xml'}" in run.stderr
    assert "PASSED" in run.stdout and "full block outputs:" in run.stdout
    assert run.blocks[0]["status"] == "passed"  # results.json was still written


def test_document_error_runs_nothing(guide_runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup
        touch {marker}
        {FENCE}

        {FENCE}shell #test id="x"
        echo x
        {FENCE}

        {FENCE}shell #testing id="y"
        echo y
        {FENCE}
        """
    )
    assert run.returncode == 2
    assert "guide.md:5: #test id='x' has no #test-result" in run.stderr
    # the same guide's warnings come with its errors, so that one edit fixes both
    assert "warning: " in run.stderr and "guide.md:9: " in run.stderr and "#testing" in run.stderr
    assert not marker.exists()


def test_unreadable_and_non_utf8_guides_are_document_errors(tmp_path: Path, run_harness) -> None:
    bad = tmp_path / "latin1.md"
    bad.write_bytes(b"# Title\n\ncaf\xe9\n")
    for guide, message in (
        (bad, "latin1.md:3: the guide is not valid UTF-8"),
        (tmp_path / "missing.md", "cannot read the guide"),
    ):
        done = run_harness(str(guide))
        assert done.returncode == 2
        assert message in done.stderr


def test_guide_from_a_url(tmp_path: Path, run_harness) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "g.md").write_text(
        f'{FENCE}shell #test id="u"\necho remote\n{FENCE}\n\n{FENCE}shell #test-result id="u"\nremote\n{FENCE}\n'
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/g.md"
        done = run_harness(url, "--output-dir", str(tmp_path / "out"))
        missing = run_harness(url + ".nope")
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "out" / "results.json").read_text())["blocks"][0]["status"] == "passed"
    assert missing.returncode == 2 and "cannot fetch the guide" in missing.stderr


def test_a_token_in_a_guide_url_is_shown_nowhere(tmp_path: Path, run_harness) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "g.md").write_text(f"{FENCE}shell #test-setup\necho remote; exit 1\n{FENCE}\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token = "tok_s3cret_in_the_url"
    base = f"http://reader:{token}-pw@127.0.0.1:{server.server_address[1]}"
    try:
        runs = [
            run_harness(url, "--output-dir", str(tmp_path / "out"), "--junit", str(junit))
            for url, junit in (
                (f"{base}/g.md?token={token}&ref=main", tmp_path / "j.xml"),
                (f"{base}/missing.md?token={token}", tmp_path / "missing.xml"),
            )
        ]
    finally:
        server.shutdown()
    assert runs[0].returncode == 1 and "remote" in runs[0].stdout, runs[0].stdout + runs[0].stderr
    assert runs[1].returncode == 2 and "cannot fetch the guide" in runs[1].stderr
    assert "token=***" in runs[1].stderr
    shown = [r.stdout + r.stderr for r in runs] + [(tmp_path / "out" / "results.json").read_text()]
    shown.append((tmp_path / "j.xml").read_text())
    for text in shown:
        assert token not in text


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
    assert "interrupted by signal 15" in record["blocks"][0]["message"]
    assert (tmp_path / "j.xml").exists()
    assert not psutil.pid_exists(int(pidfile.read_text()))


def test_descriptors_the_harness_inherited_are_not_passed_to_blocks(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    guide = tmp_path / "guide.md"
    # one command, no pipeline (whose pipes bash holds for a moment): what ls sees open, plus its own listing (3)
    guide.write_text(f'{FENCE}shell #test-setup store="fds"\nls -1 /proc/self/fd\n{FENCE}\n')
    read_end, write_end = os.pipe()  # as a runner's pipe would be
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ci.run", str(guide), "--output-dir", str(tmp_path / "out")],
            env=harness_env,
            capture_output=True,
            text=True,
            timeout=60,
            pass_fds=(read_end, write_end),
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["blocks"][0]["captured"]["fds"].split() == ["0", "1", "2", "3"]


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


def test_help_is_fast_to_import() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ci.run", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert done.returncode == 0
    for heavy in ("markdown_it", "yaml", "psutil", "requests"):
        assert f" {heavy}" not in done.stderr, f"--help imports {heavy}"


def test_stream_shows_output_while_the_block_runs(tmp_path: Path, harness_env: dict[str, str]) -> None:
    flag = tmp_path / "go"
    guide = tmp_path / "g.md"
    guide.write_text(
        f"{FENCE}shell #test-setup\necho 'first line, live'\n"
        f"while [ ! -e {flag} ]; do sleep 0.05; done\necho 'second line'\n{FENCE}\n"
    )
    harness = subprocess.Popen(
        [sys.executable, "-m", "ci.run", str(guide), "--stream", "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path,
        env=harness_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None
    seen = []
    for line in harness.stdout:  # the block is still waiting for the flag when this line arrives
        seen.append(line)
        if "first line, live" in line:
            break
    flag.touch()
    rest, _ = harness.communicate(timeout=60)
    assert harness.returncode == 0
    assert "second line" in rest


def test_several_guides_run_in_order_each_with_its_own_stores(tmp_path: Path, run_harness) -> None:
    one = tmp_path / "one.md"
    two = tmp_path / "two.md"
    one.write_text(f'{FENCE}shell #test-setup store="v"\necho one\n{FENCE}\n')
    two.write_text(
        f'{FENCE}shell #test-setup store="v"\necho two\n{FENCE}\n\n'
        f'{FENCE}shell #test id="t" load="v>>V"\necho <V>\n{FENCE}\n\n{FENCE}shell #test-result id="t"\none\n{FENCE}\n'
    )
    done = run_harness(str(one), str(two), "--output-dir", "out", "--junit", "j.xml")
    assert done.returncode == 1
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(b["guide"].rsplit("/", 1)[-1], b["status"]) for b in record["blocks"]] == [
        ("one.md", "passed"),
        ("two.md", "passed"),
        ("two.md", "mismatch"),
    ]
    assert (tmp_path / "j.xml").read_text().count("<testsuite ") == 2
    assert done.stdout.index("one.md: PASSED") < done.stdout.index("two.md: FAILED")


def test_the_demo_guide_passes(tmp_path: Path, run_harness) -> None:
    demo = Path(__file__).resolve().parents[1] / "docs" / "examples" / "demo.md"
    done = run_harness(str(demo), "--output-dir", str(tmp_path / "out"), timeout_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {b["status"] for b in record["blocks"]} == {"passed"}
    assert record["guides"][0]["processes_ended"], "the demo's background server is ended and listed"


def test_front_matter_env_that_cannot_be_spawned_is_refused_before_any_block(guide_runner) -> None:
    """A name with `=` passed --list and then crashed at the first spawn; now nothing runs and the line is named."""
    run = guide_runner(
        f"""
        ---
        ci:
          env:
            "GREETING=x": hello
        ---
        {FENCE}shell #test-setup store="who"
        echo world
        {FENCE}
        """
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "guide.md:4: front matter ci.env: the name 'GREETING=x' contains '='" in run.stderr
    assert not (run.output_dir / "results.json").exists()


def test_front_matter_alias_bomb_is_refused_not_expanded(guide_runner) -> None:
    """Nine levels of nine aliases read as text are 9**9 strings: without the refusal this --list never ends."""
    levels = ['    l0: &l0 ["ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha", "ha"]']
    levels += [f"    l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 10)]
    text = (
        "---\nci:\n  upstream:\n" + "\n".join(levels) + f'\n---\n{FENCE}shell #test-setup store="x"\necho x\n{FENCE}\n'
    )
    run = guide_runner(text, "--list", timeout_s=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "guide.md:5: front matter: YAML aliases (*name) are not allowed under ci" in run.stderr


def test_absurd_duration_options_are_usage_errors_naming_the_option(guide_runner) -> None:
    guide = f"""
        {FENCE}shell #test-setup store="x"
        echo x
        {FENCE}
        """
    for option, value in (("--timeout", "9" * 400), ("--grace", "200h"), ("--deadline", "8" * 400 + "h")):
        run = guide_runner(guide, option, value)
        assert run.returncode == 2, run.stdout + run.stderr
        assert f"[ERROR] {option}: duration" in run.stderr and "over the maximum of 7 days" in run.stderr
        assert not (run.output_dir / "results.json").exists()


def test_a_guide_with_no_runnable_block_is_a_usage_error(guide_runner) -> None:
    """It used to pass with exit 0, checking nothing; a misspelt label is the usual cause, so its warning stays."""
    text = f"""
        # Setup
        {FENCE}shell #testing-setup store="x"
        echo x
        {FENCE}
        """
    for args in ((), ("--list",)):
        run = guide_runner(text, *args)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "guide.md: no runnable block, so there is nothing to check" in run.stderr
        assert "'#testing-setup' is not a label" in run.stderr
        assert not (run.output_dir / "results.json").exists()


def test_a_selection_that_selects_nothing_is_a_usage_error(guide_runner) -> None:
    text = f"""
        {FENCE}shell #test-setup store="first"
        echo 1
        {FENCE}

        {FENCE}shell #test-setup store="second"
        echo 2
        {FENCE}
        """
    run = guide_runner(text, "--from", "second", "--until", "first")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "command line: --from second --until first selects no block to run" in run.stderr
    assert not (run.output_dir / "results.json").exists()
    assert guide_runner(text, "--from", "second", "--until", "second").statuses() == {
        "first": "not_run",
        "second": "passed",
    }


def test_only_selects_an_id_holding_a_comma_and_still_splits_lists(guide_runner) -> None:
    text = f"""
        {FENCE}shell #test-setup id="train,eval" store="first"
        echo 1
        {FENCE}

        {FENCE}shell #test-setup store="second"
        echo 2
        {FENCE}

        {FENCE}shell #test-setup store="third"
        echo 3
        {FENCE}
        """
    whole = guide_runner(text, "--only", "train,eval")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert whole.statuses() == {"train,eval": "passed", "second": "not_run", "third": "not_run"}
    repeated = guide_runner(text, "--only", "train,eval", "--only", "third")
    assert repeated.statuses() == {"train,eval": "passed", "second": "not_run", "third": "passed"}
    listed = guide_runner(text, "--only", "second, third")
    assert listed.statuses() == {"train,eval": "not_run", "second": "passed", "third": "passed"}


def test_a_guide_whose_workdir_an_earlier_guide_removed_fails_and_the_reports_are_kept(
    tmp_path: Path, run_harness
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text(f'{FENCE}shell #test-setup id="removes"\nrm -rf "{workdir}"\necho gone\n{FENCE}\n')
    second.write_text(f'{FENCE}shell #test-setup id="needs-it"\necho never\n{FENCE}\n')
    done = run_harness(
        *(str(first), str(second), "--workdir", str(workdir)),
        *("--output-dir", str(tmp_path / "out"), "--junit", str(tmp_path / "junit.xml")),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    blocks = {b["id"]: b for b in json.loads((tmp_path / "out" / "results.json").read_text())["blocks"]}
    assert blocks["removes"]["status"] == "passed"
    assert blocks["needs-it"]["status"] == "error"
    assert f"cannot enter the working directory {workdir}" in blocks["needs-it"]["message"]
    assert "<testsuite" in (tmp_path / "junit.xml").read_text()


def test_a_block_after_one_that_removed_the_output_directory_says_so(tmp_path: Path, guide_runner) -> None:
    out = tmp_path / "out"
    done = guide_runner(
        f'{FENCE}shell #test-setup id="removes"\nrm -rf "{out}"\n{FENCE}\n\n'
        f'{FENCE}shell #test-setup id="next"\necho hi\n{FENCE}\n',
        "--keep-going",
        name="g.md",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the directory of its output files, {out / 'blocks'}, is gone" in done.stdout + done.stderr
    assert "on PATH" not in done.stdout + done.stderr


def test_guides_with_the_longest_names_a_file_system_allows_run_together(tmp_path: Path, run_harness) -> None:
    # 250 bytes and 2-byte characters: a block's file name carries the guide's name, cut to leave it room
    names = ["g" * 247 + ".md", "é" * 123 + "x.md"]
    for name in names:
        (tmp_path / name).write_text(f'{FENCE}shell #test-setup id="{"b" * 40}"\necho ok\n{FENCE}\n', encoding="utf-8")
    done = run_harness(*names, "--output-dir", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    blocks = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["blocks"]
    assert [block["status"] for block in blocks] == ["passed", "passed"]
    files = sorted(path.name for path in (tmp_path / "out" / "blocks").iterdir())
    assert [name.split("-")[0] for name in files] == ["1", "2"], files  # each guide's own, told apart by number
    assert all(len(name.encode()) < 255 for name in files)
    assert [(tmp_path / "out" / block["stdout_path"]).read_text() for block in blocks] == ["ok\n", "ok\n"]
