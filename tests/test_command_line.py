"""ci.run's command line around a run: options that only go with --list, a listing piped into `head`, and the
temporary output directories of runs given no --output-dir."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from immutable import immutable

FENCE = "```"


def _write_guide(directory: Path, text: str, name: str = "guide.md") -> Path:
    guide = directory / name
    guide.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return guide


def _harness(*args: str) -> list[str]:
    return [sys.executable, "-m", "ci.run", *args]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--format", "json"], "--format json goes with --list, which prints the plan and runs nothing: add --list"),
        (["--commands"], "--commands goes with --list, which prints the plan and runs nothing: add --list"),
    ],
)
def test_an_option_of_list_without_list_is_a_usage_error_and_runs_nothing(
    tmp_path: Path, run_harness, options: list[str], said: str
) -> None:
    ran = tmp_path / "ran"
    guide = _write_guide(
        tmp_path,
        f"""
        {FENCE}shell #test-setup
        touch "{ran}"
        {FENCE}
        """,
    )
    done = run_harness(str(guide), *options, "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"[ERROR] {said}" in done.stderr
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


SELECTABLE = f"""
{FENCE}shell #test-setup store="where"
echo /srv/app
{FENCE}

{FENCE}shell #test id="hello" load="where>>DIR" load="HF_TOKEN>>TOK" load="url>>URL"
echo "hello from <DIR>"
curl -H "Authorization: <TOK>" "<URL>"
{FENCE}

{FENCE}text #test-result id="hello"
hello from ...
{FENCE}

{FENCE}shell #test id="bye"
echo bye
{FENCE}

{FENCE}text #test-result id="bye"
bye
{FENCE}
"""

SETS = ["--set", "HF_TOKEN=hf_abcdefghijk123", "--set", "url=https://ci:tok-9f8e7d6c5b@example.com/x"]


def test_list_shows_which_blocks_a_selection_runs(tmp_path: Path, run_harness) -> None:
    guide = _write_guide(tmp_path, SELECTABLE)
    listed = run_harness(str(guide), "--list", "--from", "hello", "--until", "hello", "--set", "where=/x", *SETS)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == f"{guide}: 3 blocks, 1 selected by --from hello --until hello"
    assert lines[1].startswith("   1  #test-setup") and lines[1].endswith(" (not run: before --from hello)")
    assert lines[2].startswith("   2  #test        id=hello") and "not run" not in lines[2]
    assert lines[3].startswith("   3  #test        id=bye") and lines[3].endswith(" (not run: after --until hello)")

    as_json = run_harness(str(guide), "--list", "--format", "json", "--only", "bye", *SETS)
    assert as_json.returncode == 0, as_json.stderr
    entries = json.loads(as_json.stdout)  # still every block: a tool reading the plan sees the whole guide
    assert [(e["ordinal"], e["selected"], e.get("not_run")) for e in entries] == [
        (1, False, "not selected by --only"),
        (2, False, "not selected by --only"),
        (3, True, None),
    ]
    assert "command" not in entries[0]  # only when asked for

    nothing = run_harness(str(guide), "--list", "--from", "bye", "--until", "hello", *SETS)
    assert nothing.returncode == 2 and nothing.stdout == ""
    assert "--from bye --until hello selects no block to run" in nothing.stderr


def test_list_commands_shows_each_command_as_it_will_run_masked(tmp_path: Path, run_harness) -> None:
    guide = _write_guide(tmp_path, SELECTABLE)
    secret_env = {"API_TOKEN": "tok-9f8e7d6c5b"}  # the --set url holds it
    listed = run_harness(str(guide), "--list", "--commands", *SETS, env=secret_env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1:8] == [
        "   1  #test-setup  store=where                    shell   " + f"{guide}:1  timeout=10800s",
        "      echo /srv/app",
        "   2  #test        id=hello                       shell   "
        + f"{guide}:5  timeout=10800s load=where>>DIR load=HF_TOKEN>>TOK load=url>>URL",
        '      echo "hello from <DIR>"',
        '      curl -H "Authorization: ***" "https://ci:***@example.com/x"',
        "      # <DIR>: stored by #test-setup store=where at line 1 at run time",
        "   3  #test        id=bye                         shell   " + f"{guide}:14  timeout=10800s",
    ]
    assert "hf_abcdefghijk123" not in listed.stdout and "tok-9f8e7d6c5b" not in listed.stdout

    # --from leaves the setup out: the --set value is the one the block loads
    as_json = run_harness(
        str(guide), "--list", "--commands", "--format", "json", "--from", "hello", "--set", "where=/x", *SETS
    )
    assert as_json.returncode == 0, as_json.stderr
    hello = json.loads(as_json.stdout)[1]
    assert (
        hello["command"]
        == 'echo "hello from /x"\ncurl -H "Authorization: ***" "https://ci:tok-9f8e7d6c5b@example.com/x"'
    )
    assert hello["command_pending"] == []


def test_list_puts_one_space_between_the_settings_of_a_block(tmp_path: Path, run_harness) -> None:
    """After the time limit, loads, `hidden`, `skip=`, the retries and `rerun_on_resume` are one space apart."""
    guide = _write_guide(
        tmp_path,
        f"""
        <!--
        {FENCE}shell #test-setup store="where"
        echo /srv/app
        {FENCE}
        -->

        {FENCE}shell #test-setup load="where>>DIR" skip='no NPU here' retry="2" rerun_on_resume
        ls <DIR>
        {FENCE}
        """,
    )
    listed = run_harness(str(guide), "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1:] == [
        "   1  #test-setup  store=where                    shell   " + f"{guide}:2  timeout=10800s hidden",
        "   2  #test-setup  -                              shell   "
        + f"{guide}:7  timeout=10800s load=where>>DIR skip='no NPU here' retry=2 retry_delay=10s rerun_on_resume",
    ]


QUICK = f"""
{FENCE}shell #test-setup
echo quick
{FENCE}
"""

# Waits (a bounded while) for the file GO names: the run holds its output directory meanwhile.
WAITING = f"""
{FENCE}shell #test-setup
for _ in $(seq 300); do [ -e "$GO" ] && break; sleep 0.1; done
[ -e "$GO" ]
{FENCE}
"""

DAY_S = 86400.0


def _outputs_named(stdout: str) -> Path:
    """The directory the log names as `full block outputs: DIR`."""
    (line,) = [line for line in stdout.splitlines() if line.startswith("full block outputs: ")]
    return Path(line.removeprefix("full block outputs: "))


def _earlier_run(parent: Path, name: str, age_s: float) -> Path:
    """A directory an earlier run left, last changed AGE_S ago."""
    directory = parent / name
    directory.mkdir()
    (directory / "results.json").write_text("{}\n", encoding="utf-8")
    changed = time.time() - age_s
    os.utime(directory, (changed, changed))
    return directory


def _wait_for_running_block(parent: Path, pid: int) -> Path:
    """The output directory of the run PID, once its first block runs (a bounded wait): from then on, until the
    block ends, the run adds nothing to the directory itself, and the directory's last change stays as set."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid_file in parent.glob("run-*/harness.pid"):
            with contextlib.suppress(OSError):
                if pid_file.read_text(encoding="ascii").strip() == str(pid) and (pid_file.parent / "blocks").is_dir():
                    return pid_file.parent
        time.sleep(0.05)
    raise AssertionError(f"the run {pid} made no output directory under {parent}")


def test_runs_without_output_dir_share_one_parent_whose_oldest_go(
    tmp_path: Path, harness_env: dict[str, str], run_harness
) -> None:
    """The 10 newest are kept, and every one changed within the hour, and one a run is using (whatever its age)."""
    temporary, go = tmp_path / "tmp", tmp_path / "go"
    temporary.mkdir()
    env = {**harness_env, "TMPDIR": str(temporary), "GO": str(go)}
    parent = temporary / "guide-guard"
    waiting = subprocess.Popen(
        _harness(str(_write_guide(tmp_path, WAITING, "waiting.md"))),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        in_use = _wait_for_running_block(parent, waiting.pid)
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700  # made by the first run, for its user only
        os.utime(in_use, (time.time() - 3 * DAY_S,) * 2)  # the oldest of all: a run of three days
        old = [_earlier_run(parent, f"run-old{index}", 2 * DAY_S + index) for index in range(3)]
        recent = [_earlier_run(parent, f"run-recent{index}", 1800 + index) for index in range(10)]
        done = run_harness(str(_write_guide(tmp_path, QUICK, "quick.md")), env=env)
        left = sorted(parent.iterdir())  # while the first run still waits
        kept_its_blocks = (in_use / "blocks").is_dir()
    finally:
        go.touch()
        stdout, stderr = waiting.communicate(timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    new = _outputs_named(done.stdout)
    assert new.parent == parent and new.name.startswith("run-")
    assert (new / "results.json").is_file()
    assert done.stderr == ""  # pruning is not worth a word
    assert left == sorted([in_use, new, *recent])  # the two-day-old ones went
    assert kept_its_blocks
    assert not any(directory.exists() for directory in old)
    # the run using its directory all along was not disturbed
    assert waiting.returncode == 0, stdout + stderr
    assert _outputs_named(stdout) == in_use
    assert json.loads((in_use / "results.json").read_text(encoding="utf-8"))["blocks"][0]["status"] == "passed"


@contextlib.contextmanager
def _unremovable(directory: Path) -> Iterator[None]:
    """Make what is inside DIRECTORY impossible to remove for this user: immutable as root, read-only otherwise."""
    inner = directory / "left-by-root"
    inner.mkdir()
    (inner / "log").write_text("x\n", encoding="utf-8")
    changed = time.time() - 2 * DAY_S
    os.utime(directory, (changed, changed))
    if os.geteuid() == 0:
        with immutable(inner / "log"):
            yield
        return
    inner.chmod(0o500)
    try:
        yield
    finally:
        inner.chmod(0o700)


def test_an_earlier_directory_that_cannot_be_removed_is_a_warning_only(tmp_path: Path, run_harness) -> None:
    temporary = tmp_path / "tmp"
    parent = temporary / "guide-guard"
    parent.mkdir(parents=True, mode=0o700)
    for index in range(10):
        _earlier_run(parent, f"run-recent{index}", 1800 + index)
    stuck = _earlier_run(parent, "run-stuck", 2 * DAY_S)
    with _unremovable(stuck):
        done = run_harness(str(_write_guide(tmp_path, QUICK)), env={"TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert _outputs_named(done.stdout).parent == parent
    assert (
        f"warning: 1 earlier temporary output directory under {parent} could not be removed ({stuck}: " in done.stderr
    )
    assert ": remove it by hand" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("writable by others", "others may write in it (mode 777); make it 0700 or remove it"),
        ("symbolic link", "it is not a directory (a symbolic link or a file is there)"),
    ],
)
def test_a_parent_that_is_not_safely_ours_is_not_used(tmp_path: Path, run_harness, kind: str, why: str) -> None:
    """The run goes on in a plain temporary directory, and says why it is not under the shared parent."""
    temporary = tmp_path / "tmp"
    parent = temporary / "guide-guard"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    temporary.mkdir()
    if kind == "symbolic link":  # planted where the parent belongs: a run must not write through it
        parent.symlink_to(elsewhere)
    else:
        parent.mkdir()
        parent.chmod(0o777)
    done = run_harness(str(_write_guide(tmp_path, QUICK)), env={"TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = _outputs_named(done.stdout)
    assert outputs.parent == temporary and outputs.name.startswith("guide-guard-run-")
    assert (outputs / "results.json").is_file()
    assert f"warning: temporary outputs are in {outputs}, not under {parent}: {why}\n" in done.stderr
    assert list(parent.iterdir()) == [] and list(elsewhere.iterdir()) == []


def test_two_runs_pruning_at_once_both_keep_their_outputs_and_follow_no_link(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    """Started together, each prunes what is past its time and nothing else: not the other's new directory, and not
    what a symbolic link planted among the old ones (`run-x -> elsewhere`) leads to."""
    temporary = tmp_path / "tmp"
    parent = temporary / "guide-guard"
    parent.mkdir(parents=True, mode=0o700)
    important = tmp_path / "important"
    important.mkdir()
    (important / "keep.txt").write_text("precious\n", encoding="utf-8")
    old = [_earlier_run(parent, f"run-old{index}", 2 * DAY_S + index) for index in range(12)]
    planted = parent / "run-x"
    planted.symlink_to(important, target_is_directory=True)
    os.utime(planted, (time.time() - 3 * DAY_S,) * 2, follow_symlinks=False)
    env = {**harness_env, "TMPDIR": str(temporary)}
    guides = [_write_guide(tmp_path, QUICK, f"quick{index}.md") for index in range(2)]
    runs = [
        subprocess.Popen(
            _harness(str(guide)), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for guide in guides
    ]
    finished = [run.communicate(timeout=60) for run in runs]
    for run, (stdout, stderr) in zip(runs, finished, strict=True):
        assert run.returncode == 0, (stdout + stderr).decode()
        assert b"Traceback" not in stderr
    made = [_outputs_named(stdout.decode()) for stdout, _ in finished]
    assert len(set(made)) == 2 and all((directory / "results.json").is_file() for directory in made)
    assert planted.is_symlink() and (important / "keep.txt").read_text(encoding="utf-8") == "precious\n"
    assert sum(directory.exists() for directory in old) == 8  # 10 newest kept, the two new ones among them


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_tmpdir_that_cannot_be_used_is_said(tmp_path: Path, run_harness, kind: str) -> None:
    """Python's tempfile passes over such a TMPDIR for another directory without a word; the run says so."""
    wanted = tmp_path / "scratch"
    if kind == "a file":
        wanted.write_text("", encoding="utf-8")
    done = run_harness(str(_write_guide(tmp_path, QUICK)), env={"TMPDIR": str(wanted)})
    outputs = _outputs_named(done.stdout)
    shutil.rmtree(outputs)
    assert done.returncode == 0, done.stdout + done.stderr
    why = "it does not exist" if kind == "missing" else "it is not a directory"
    assert (
        f"warning: TMPDIR={wanted} cannot be used ({why}), so temporary outputs go under {outputs.parent.parent}:"
        " fix TMPDIR\n" in done.stderr
    )


def _into_a_closed_pipe(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """COMMAND with its stdout a pipe whose reader is gone before it starts: its first write fails (EPIPE)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run(command, cwd=cwd, stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(writer)


@pytest.mark.parametrize(
    "command",
    [
        ["ci.registry", "guides.yaml", "--matrix"],
        ["ci.drift", "--base", "HEAD", "--no-pins", "docs/examples/demo.md"],
        ["ci.precommit", "docs/examples/demo.md", "--no-static"],
        ["ci.monitor", "--state", "{tmp}/state.json", "--record-result", "passed", "--ref", "v1", "guides.yaml"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_report_command_piped_into_a_reader_that_stops_ends_quietly(command: list[str], tmp_path: Path) -> None:
    """`python -m ci.registry guides.yaml --matrix | jq …` with jq gone: no traceback, no word, its own status."""
    repository = Path(__file__).resolve().parent.parent
    command = [part.replace("{tmp}", str(tmp_path)) for part in command]
    done = _into_a_closed_pipe([sys.executable, "-m", *command], repository)
    assert "Traceback" not in done.stderr and "[ERROR]" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr


def test_the_rehearsal_says_once_that_its_console_is_gone_and_keeps_its_exit_status(tmp_path: Path) -> None:
    """The rehearsal's report is for a person: a closed console is worth one line on stderr, never a traceback."""
    done = _into_a_closed_pipe([sys.executable, "-m", "ci.rehearse", "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "[ERROR] stdout cannot be written any more: its reader closed it (Broken pipe); what follows for it is"
        " dropped, and the command carries on to its end\n"
    )
