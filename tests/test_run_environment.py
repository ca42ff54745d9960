"""What a block's process is given: its working directory and PWD, the front matter's environment, an empty stdin,
the bash on its PATH, the signal dispositions of a terminal, no descriptor of the harness's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FENCE = "```"


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
