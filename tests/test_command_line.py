"""ci.run's command line around a run: options that only go with --list, a listing piped into `head`, and the
temporary output directories of runs given no --output-dir."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

FENCE = "```"


def _write_guide(directory: Path, text: str, name: str = "guide.md") -> Path:
    guide = directory / name
    guide.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return guide


def _harness(*args: str) -> list[str]:
    return [sys.executable, "-m", "ci.run", *args]


def test_format_without_list_is_a_usage_error_and_runs_nothing(tmp_path: Path, harness_env: dict[str, str]) -> None:
    ran = tmp_path / "ran"
    guide = _write_guide(
        tmp_path,
        f"""
        {FENCE}shell #test-setup
        touch "{ran}"
        {FENCE}
        """,
    )
    done = subprocess.run(
        _harness(str(guide), "--format", "json", "--output-dir", str(tmp_path / "out")),
        env=harness_env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "[ERROR] --format json goes with --list, which prints the plan and runs nothing: add --list" in done.stderr
    assert not ran.exists()  # no block ran
    assert not (tmp_path / "out" / "results.json").exists()
    assert done.stdout == ""


def _many_blocks(count: int) -> str:
    """A guide whose --list --format json is far longer than a pipe holds (64 KiB on Linux)."""
    blocks = []
    for index in range(count):
        blocks += [f'{FENCE}shell #test id="b{index}"', f"echo {'x' * 200}", FENCE, ""]
        blocks += [f'{FENCE}text #test-result id="b{index}"', "x" * 200, FENCE, ""]
    return "\n".join(blocks)


def test_a_listing_piped_into_head_ends_quietly(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """`--list --format json | head -1`: the first line, then an end without a word on stderr, exit 0."""
    guide = _write_guide(tmp_path, _many_blocks(400))
    harness = subprocess.Popen(
        _harness(str(guide), "--list", "--format", "json"),
        env=harness_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None and harness.stderr is not None
    assert harness.stdout.readline() == "[\n"  # as `head -1` reads it, and then closes the pipe
    harness.stdout.close()
    stderr = harness.stderr.read()
    assert harness.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr
    assert stderr == ""  # a reader that has read enough is no error of a listing


def test_a_listing_on_a_full_disk_is_still_said(tmp_path: Path, harness_env: dict[str, str]) -> None:
    """Only a closed pipe is taken as normal for a listing: a log on a full disk is an error worth a line."""
    guide = _write_guide(tmp_path, _many_blocks(2))
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            _harness(str(guide), "--list"),
            env=harness_env,
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0
    assert "[ERROR] stdout cannot be written any more: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr
