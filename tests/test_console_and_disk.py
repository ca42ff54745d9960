"""The harness's own troubles: a console that cannot be written, a file name that is not UTF-8, a full disk.

Each still ends with the verdict as its exit status and every report written that can be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from ci.base.files import NEARLY_FULL_BYTES, DiskSpace, is_full

FENCE = "```"

# The second block waits for GO, which the test makes once it has closed the harness's stdout: whatever
# the harness writes from then on (the third block, the verdicts, the last lines) meets a closed pipe.
THREE_BLOCKS = f"""
# Console

{FENCE}shell #test-setup store="first"
echo first
{FENCE}

{FENCE}shell #test-setup
for _ in $(seq 300); do [ -e "$GO" ] && break; sleep 0.1; done
[ -e "$GO" ]
seq 1 5000
{FENCE}

{FENCE}shell #test id="third"
echo third
{FENCE}

{FENCE}shell #test-result id="third"
third
{FENCE}
"""


def _write_guide(directory: Path, text: str, name: str = "guide.md") -> Path:
    guide = directory / name
    guide.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return guide


def _record(output_dir: Path) -> dict[str, Any]:
    """results.json, read as a strict UTF-8 reader would."""
    return json.loads((output_dir / "results.json").read_bytes().decode("utf-8"))


def _junit_cases(path: Path) -> list[ET.Element]:
    root = ET.fromstring(path.read_bytes().decode("utf-8"))
    return root.findall("testsuite/testcase")


def _junit_verdicts(path: Path) -> list[str]:
    """Each testcase's verdict element (failure, error, skipped), or passed."""
    verdicts = ("failure", "error", "skipped")
    return [next((child.tag for child in case if child.tag in verdicts), "passed") for case in _junit_cases(path)]


def _harness(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ci.run", *args]


@pytest.mark.parametrize("stream", [False, True], ids=["log", "stream"])
def test_a_reader_that_closes_stdout_early_costs_only_the_console(
    tmp_path: Path, harness_env: dict[str, str], stream: bool
) -> None:
    guide = _write_guide(tmp_path, THREE_BLOCKS)
    go, out, junit = tmp_path / "go", tmp_path / "out", tmp_path / "junit.xml"
    command = _harness(tmp_path, str(guide), "--output-dir", str(out), "--junit", str(junit))
    harness = subprocess.Popen(
        [*command, *(["--stream"] if stream else [])],
        env={**harness_env, "GO": str(go)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None and harness.stderr is not None
    assert harness.stdout.readline().startswith("=== ")  # as `| head -1` reads it
    harness.stdout.close()
    go.touch()
    stderr = harness.stderr.read()
    assert harness.wait(timeout=60) == 0, stderr  # the verdict: every block passed
    assert "Traceback" not in stderr
    assert "[ERROR] stdout cannot be written any more: its reader closed it (Broken pipe)" in stderr
    assert [block["status"] for block in _record(out)["blocks"]] == ["passed", "passed", "passed"]
    assert _junit_verdicts(junit) == ["passed", "passed", "passed"]


def test_a_console_log_on_a_full_disk_costs_only_the_console(tmp_path: Path, harness_env: dict[str, str]) -> None:
    guide = _write_guide(tmp_path, THREE_BLOCKS)
    (tmp_path / "go").touch()
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    with open("/dev/full", "w") as full:  # every write to it fails with ENOSPC
        done = subprocess.run(
            _harness(tmp_path, str(guide), "--output-dir", str(out), "--junit", str(junit)),
            env={**harness_env, "GO": str(tmp_path / "go")},
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert "[ERROR] stdout cannot be written any more: No space left on device (writing /dev/full)" in done.stderr
    assert "Traceback" not in done.stderr
    assert [block["status"] for block in _record(out)["blocks"]] == ["passed", "passed", "passed"]
    assert _junit_verdicts(junit) == ["passed", "passed", "passed"]


def _closed_pipe() -> int:
    """The writing end of a pipe whose reader is already gone: every write to it fails with EPIPE."""
    reader, writer = os.pipe()
    os.close(reader)
    return writer


@pytest.mark.parametrize("console", ["closed pipe", "full disk"])
@pytest.mark.parametrize(
    ("args", "status"),
    [(["--list"], 0), (["--list", "--format", "json"], 0), (["--only", "nowhere"], 2)],
    ids=["list", "list-json", "document-error"],
)
def test_a_console_that_cannot_be_written_never_costs_the_exit_status(
    tmp_path: Path, harness_env: dict[str, str], console: str, args: list[str], status: int
) -> None:
    guide = _write_guide(tmp_path, THREE_BLOCKS)
    broken = _closed_pipe() if console == "closed pipe" else os.open("/dev/full", os.O_WRONLY)
    try:
        # both streams: --list writes to stdout, a document error to stderr
        done = subprocess.run(
            _harness(tmp_path, str(guide), *args),
            env=harness_env,
            stdin=subprocess.DEVNULL,
            stdout=broken,
            stderr=broken,
            timeout=60,
        )
    finally:
        os.close(broken)
    assert done.returncode == status  # not 1 (a traceback) nor 120 (a failed flush at exit)


def test_a_console_that_is_not_utf8_shows_what_it_cannot_hold_as_escapes(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    guide = _write_guide(tmp_path, THREE_BLOCKS.replace("# Console", "# Café ✅"))
    (tmp_path / "go").touch()
    out = tmp_path / "out"
    done = subprocess.run(
        _harness(tmp_path, str(guide), "--output-dir", str(out)),
        env={**harness_env, "GO": str(tmp_path / "go"), "PYTHONIOENCODING": "ascii"},  # an old LANG=C, say
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'in "Caf\\xe9 \\u2705" at' in done.stdout.decode("ascii")
    assert [block["heading"] for block in _record(out)["blocks"]] == ["Café ✅"] * 3


def test_a_guide_whose_file_name_is_not_utf8_runs_and_is_shown_with_its_bytes_escaped(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/guide-\xff.md"))
    odd.write_text(textwrap.dedent(THREE_BLOCKS).lstrip("\n"), encoding="utf-8")
    (tmp_path / "go").touch()
    other = _write_guide(tmp_path, THREE_BLOCKS, "other.md")
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    shown = f"{tmp_path}/guide-\\xff.md"
    # a strict UTF-8 console: a lone surrogate written to it as it is would be a UnicodeEncodeError
    env = {**harness_env, "GO": str(tmp_path / "go"), "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        _harness(tmp_path, str(odd), str(other), "--output-dir", str(out), "--junit", str(junit)),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 0, stdout + stderr
    assert f"=== {shown}: 3 blocks" in stdout and f"=== {shown}: PASSED" in stdout
    record = _record(out)
    assert [guide["guide"] for guide in record["guides"]] == [shown, str(other)]
    blocks = [block for block in record["blocks"] if block["guide"] == shown]
    assert [block["status"] for block in blocks] == ["passed", "passed", "passed"]
    # the files of a guide among several are named after it: as results.json names them, found where it says
    assert (out / blocks[0]["stdout_path"]).read_text() == "first\n"
    suites = ET.fromstring(junit.read_bytes().decode("utf-8")).findall("testsuite")
    assert [suite.get("name") for suite in suites] == [shown, str(other)]
    assert {case.get("file") for case in suites[0]} == {shown}

    listed = subprocess.run(
        _harness(tmp_path, str(odd), "--list"), env=env, capture_output=True, timeout=60, check=True
    )
    assert listed.stdout.decode("utf-8").startswith(f"{shown}: 3 blocks\n")
    assert f"{shown}:3 " in listed.stdout.decode("utf-8")
    as_json = subprocess.run(
        _harness(tmp_path, str(odd), "--list", "--format", "json"), env=env, capture_output=True, timeout=60, check=True
    )
    assert {entry["guide"] for entry in json.loads(as_json.stdout.decode("utf-8"))} == {shown}


@pytest.mark.parametrize(
    ("free_bytes", "free_inodes", "full"),
    [
        (0, 1000, True),  # a write found no room
        (NEARLY_FULL_BYTES - 1, 1000, True),  # a few blocks left: what a failed write leaves
        (NEARLY_FULL_BYTES, 1000, False),
        (10 * 1024**3, 0, True),  # no file can be made
        (10 * 1024**3, None, False),  # a file system that counts no inodes (btrfs)
    ],
)
def test_the_full_disk_rule(free_bytes: int, free_inodes: int | None, full: bool) -> None:
    assert is_full(DiskSpace(free_bytes, free_inodes, "/")) is full


def _in_a_small_disk(directory: Path, command: list[str], *, files: int = 1000) -> list[str]:
    """COMMAND run with a 64 KiB tmpfs of FILES inodes mounted on DIRECTORY, in a mount namespace of its own.

    The mount is gone with the namespace, however the test ends. A user namespace makes the mount
    possible without root, where the kernel allows them.
    """
    as_root = [] if os.geteuid() == 0 else ["--map-root-user"]
    mount = f'mount -t tmpfs -o size=64k,nr_inodes={files} tmpfs "$1" && shift && exec "$@"'
    return ["unshare", "--mount", *as_root, "--", "sh", "-c", mount, "sh", str(directory), *command]


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """An empty directory that a 64 KiB tmpfs is mounted on for commands run through _in_a_small_disk."""
    directory = tmp_path / "small"
    directory.mkdir()
    try:
        probe = subprocess.run(_in_a_small_disk(directory, ["true"]), capture_output=True, text=True, timeout=30)
    except OSError as exc:
        pytest.skip(f"no unshare to mount a small tmpfs with: {exc}")
    if probe.returncode != 0:
        pytest.skip(f"this machine refuses a tmpfs mount in a namespace of our own: {probe.stderr.strip()}")
    return directory


@pytest.mark.parametrize("junit_on_the_full_disk", [False, True], ids=["junit-elsewhere", "junit-there-too"])
def test_a_block_whose_output_fills_the_disk_says_the_disk_is_full(
    tmp_path: Path, harness_env: dict[str, str], small_disk: Path, junit_on_the_full_disk: bool
) -> None:
    guide = _write_guide(
        tmp_path,
        f"""
        # Full

        {FENCE}shell #test-setup
        echo small
        {FENCE}

        {FENCE}shell #test-setup
        seq 1 100000
        {FENCE}
        """,
    )
    out = small_disk / "out"
    junit = out / "junit.xml" if junit_on_the_full_disk else tmp_path / "junit.xml"
    listing = tmp_path / "listing"  # what the output directory holds once the harness is done, seen in its namespace
    harness = _harness(tmp_path, str(guide), "--output-dir", str(out), "--junit", str(junit))
    # a record an earlier run left there must not pass for this run's (with the JUnit report on the full disk
    # too, none is left: its room would let that report be written)
    earlier = "true" if junit_on_the_full_disk else 'mkdir -p "$OUT" && echo earlier > "$OUT/results.json"'
    then_list = ["sh", "-c", earlier + '; "$@"; status=$?; ls -a "$OUT" > "$LISTING"; exit $status', "sh", *harness]
    done = subprocess.run(
        _in_a_small_disk(small_disk, then_list),
        env={**harness_env, "OUT": str(out), "LISTING": str(listing)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    full = f"the disk is full: the file system holding {out}/blocks (mounted at {small_disk}) has 0 B free"
    assert f"exit 1; {full}, so its output may not have been written whole" in done.stdout
    assert "free space there or name another --output-dir" in done.stdout
    # a report that cannot be written there says why, and leaves no file rather than an empty or a cut one
    unwritten = [("the run record", out / "results.json")]
    if junit_on_the_full_disk:
        unwritten.append(("the JUnit report", junit))
    for what, path in unwritten:
        assert f"[ERROR] could not write {what} to {path}: No space left on device: the disk is full" in done.stderr
    if not junit_on_the_full_disk:
        assert f"[ERROR] the run record left at {out / 'results.json'} by an earlier run was removed" in done.stderr
    assert listing.read_text().split() == [".", "..", "blocks"]
    if not junit_on_the_full_disk:  # elsewhere, it is whole
        assert _junit_verdicts(junit) == ["passed", "failure"]
        failure = _junit_cases(junit)[1].find("failure")
        assert failure is not None and full in (failure.get("message") or "")


def test_a_stack_dump_that_finds_the_disk_full_is_a_note_and_the_reports_are_written(
    tmp_path: Path, harness_env: dict[str, str], small_disk: Path
) -> None:
    guide = _write_guide(
        tmp_path,
        f"""
        {FENCE}python #test-setup timeout='2'
        import sys, time
        try:
            while True:  # fill the disk with stdout, then wait to be timed out
                sys.stdout.write("x" * 4096)
                sys.stdout.flush()
        except OSError:
            pass
        while True:
            time.sleep(0.1)
        {FENCE}
        """,
    )
    out, junit = small_disk / "out", tmp_path / "junit.xml"
    done = subprocess.run(
        _in_a_small_disk(
            small_disk,
            _harness(tmp_path, str(guide), "--output-dir", str(out), "--junit", str(junit), "--grace", "1"),
        ),
        env=harness_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    if "stack dump of pid" not in done.stdout:
        pytest.skip(f"no stack dump was tried here (py-spy or ptrace missing): {done.stdout[-2000:]}")
    assert "not kept: cannot write" in done.stdout and "No space left on device" in done.stdout
    (case,) = _junit_cases(junit)
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "timed_out"


def test_a_block_whose_output_files_cannot_be_made_says_the_disk_is_full(
    tmp_path: Path, harness_env: dict[str, str], small_disk: Path
) -> None:
    out, junit = small_disk / "out", tmp_path / "junit.xml"
    guide = _write_guide(
        tmp_path,
        f"""
        {FENCE}shell #test-setup
        i=0
        while [ "$i" -lt 100 ] && touch "{out}/file-$i" 2>/dev/null; do i=$((i + 1)); done
        echo "made $i files"; echo "until no more could be made" >&2
        {FENCE}

        {FENCE}shell #test-setup
        echo second
        {FENCE}

        {FENCE}shell #test-setup
        echo third
        {FENCE}
        """,
    )
    harness = _harness(tmp_path, str(guide), "--output-dir", str(out), "--junit", str(junit), "--keep-going")
    done = subprocess.run(
        _in_a_small_disk(small_disk, harness, files=64),
        env=harness_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    # the second block's files may have been made while the first ran; the third's never can be
    verdicts = _junit_verdicts(junit)
    assert verdicts[0] == "passed" and verdicts[2] == "error", done.stdout
    full = f"No space left on device: the disk is full: the file system holding {out}/blocks/003-3.stdout.txt"
    assert f"could not be run: {full} (mounted at {small_disk}) has no room for another file" in done.stdout


def test_a_pid_file_that_finds_the_disk_full_says_so(
    tmp_path: Path, harness_env: dict[str, str], small_disk: Path
) -> None:
    guide = _write_guide(tmp_path, THREE_BLOCKS)
    out = small_disk / "out"
    # two files: the file system's top directory and the output directory; none for the pid file
    done = subprocess.run(
        _in_a_small_disk(small_disk, _harness(tmp_path, str(guide), "--output-dir", str(out)), files=2),
        env=harness_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        f"[ERROR] cannot write the pid file {out}/harness.pid (No space left on device: the disk is full:"
        f" the file system holding {out} (mounted at {small_disk}) has no room for another file); nothing was run"
    ) in done.stderr
