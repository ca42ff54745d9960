"""`guide-guard-job`: what a workflow's job runs around the harness (ci/github/job.py): prepare, stop, hand-back.

The workflow's own steps run these commands too (tests/test_workflow_run_job.py runs guide-run.yml's prepare, stop and
hand-back steps with real harnesses); here are the decisions as pure functions and the command's other ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

from ci.github.handback import Owner, owner_to_restore
from ci.github.job import PrepareError, deadline_minutes, is_harness_command, prepare

JOB_SCRIPT = Path(sys.executable).parent / "guide-guard-job"


def job_command(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert JOB_SCRIPT.exists(), f"no {JOB_SCRIPT}: install the project (pip install -e .)"
    return subprocess.run(
        [str(JOB_SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize(
    "job_minutes,left",
    [
        *[("300", 285), ("90.5", 75), ("16", 1), ("16.", 1), (" 20 ", 5)],
        *[("15", None), ("15.9", None), ("0", None), ("", None), ("-20", None), ("1e3", None), ("twenty", None)],
    ],
)
def test_the_deadline_is_the_margin_below_the_job_limit_in_whole_minutes(job_minutes: str, left: int | None) -> None:
    if left is not None:
        assert deadline_minutes(job_minutes, 15) == left
        return
    with pytest.raises(PrepareError) as refused:
        deadline_minutes(job_minutes, 15)
    assert refused.value.title == "timeout-minutes too small"
    assert f"the input timeout-minutes is '{job_minutes}'; give at least 16 (minutes)" in str(refused.value)


def test_the_preparation_exports_a_mirror_only_when_set_and_never_a_line_break() -> None:
    plain = prepare("60", 15, "/tmp/w", "", None)
    assert (plain.outputs(), plain.environment()) == ({"deadline": "45m", "workdir": "/tmp/w"}, {})
    mirrored = prepare("60", 15, "/tmp/w", "http://mirror.invalid", "resume-here")
    assert mirrored.environment() == {"HF_ENDPOINT": "http://mirror.invalid"}
    assert mirrored.outputs()["resume-dir"] == "resume-here"
    for broken in ("http://m\nLD_PRELOAD=x", "http://m\rX=1"):
        with pytest.raises(PrepareError, match="HF_ENDPOINT holds a line break"):
            prepare("60", 15, "/tmp/w", broken, None)


def test_prepare_writes_the_outputs_and_the_environment_the_later_steps_read(tmp_path: Path) -> None:
    files = {name: tmp_path / name for name in ("GITHUB_OUTPUT", "GITHUB_ENV")}
    env = {**os.environ, **{name: str(path) for name, path in files.items()}, "GITHUB_ACTIONS": "true"}
    workdir = tmp_path / "temp" / "guide-workdir"
    common = ["prepare", "--margin-minutes", "15", "--workdir", str(workdir)]
    done = job_command(
        *common, "--job-timeout-minutes", "300", "--hub-mirror", "http://m.invalid", cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    assert files["GITHUB_OUTPUT"].read_text() == f"deadline=285m\nworkdir={workdir}\n"
    assert files["GITHUB_ENV"].read_text() == "HF_ENDPOINT=http://m.invalid\n"
    assert workdir.is_dir()
    refused = job_command(*common, "--job-timeout-minutes", "10", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stdout.startswith("::error title=timeout-minutes too small::the input timeout-minutes is '10'")
    assert files["GITHUB_OUTPUT"].read_text().count("deadline=") == 1, "a refused run writes no deadline"


def test_prepare_refuses_a_workdir_or_output_file_it_cannot_write_with_the_fix(tmp_path: Path) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("", encoding="utf-8")
    env = {**os.environ, "GITHUB_OUTPUT": str(tmp_path / "output"), "GITHUB_ENV": str(tmp_path / "env")}
    env.pop("GITHUB_ACTIONS", None)
    common = ["prepare", "--margin-minutes", "15", "--job-timeout-minutes", "60"]
    refused = job_command(*common, "--workdir", str(in_the_way / "workdir"), cwd=tmp_path, env=env)
    assert (refused.returncode, refused.stderr.splitlines()) == (
        2,
        [
            f"[ERROR] cannot create the blocks' directory --workdir {in_the_way / 'workdir'}: a file stands where a"
            " directory must be; give a directory the job's user can create, outside the checkout (the workflow"
            " gives $RUNNER_TEMP/guide-workdir)"
        ],
    )
    assert not (tmp_path / "output").exists(), "a refused run writes no step output"
    for output, why in [(tmp_path, "it is a directory"), (tmp_path / "gone" / "output", "No such file or directory")]:
        env["GITHUB_OUTPUT"] = str(output)
        refused = job_command(*common, "--workdir", str(tmp_path / "w"), cwd=tmp_path, env=env)
        assert (refused.returncode, refused.stderr.splitlines()) == (
            2,
            [
                f"[ERROR] cannot write $GITHUB_OUTPUT ({output}): {why}; run this in a job's step, where the runner"
                " sets GITHUB_OUTPUT to a file of its own, or unset GITHUB_OUTPUT to have the lines printed"
            ],
        )
    # a $GITHUB_ENV it cannot write leaves $GITHUB_OUTPUT as it was: no half of the preparation is handed on
    env.update(GITHUB_OUTPUT=str(tmp_path / "output"), GITHUB_ENV=str(tmp_path))
    mirror = ["--hub-mirror", "https://hub.example.org"]
    refused = job_command(*common, "--workdir", str(tmp_path / "w"), *mirror, cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "cannot write $GITHUB_ENV" in refused.stderr, refused.stderr
    assert not (tmp_path / "output").exists() or (tmp_path / "output").read_text(encoding="utf-8") == ""
    # a resume directory that cannot be made where it is asked for is refused before anything is written
    env["GITHUB_ENV"] = str(tmp_path / "env")
    resume = ["--resume-dir", str(in_the_way / "reports")]
    refused = job_command(*common, "--workdir", str(tmp_path / "w"), *resume, cwd=tmp_path, env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"--resume-dir {in_the_way / 'reports'}: a file stands where a directory must be" in refused.stderr
    assert not (tmp_path / "output").exists() or (tmp_path / "output").read_text(encoding="utf-8") == ""


@pytest.mark.parametrize(
    "argv,harness",
    [
        (["/venv/bin/python", "/venv/bin/guide-guard", "g.md", "--output-dir", "o"], True),  # the console script
        (["/usr/bin/python3", "-m", "ci.run", "g.md"], True),
        (["python3", "-X", "dev", "-m", "ci", "g.md"], True),  # `python -m ci` is ci.run
        (["/venv/bin/python", "/venv/bin/guide-guard-monitor", "g.md"], False),
        (["python3", "-m", "ci.monitor", "g.md"], False),
        (["bash", "-c", "python -m ci.run g.md"], False),
        (["sleep", "600"], False),
        ([], False),
    ],
)
def test_the_harness_is_told_by_its_command_line(argv: list[str], harness: bool) -> None:
    assert is_harness_command(argv) is harness


@pytest.mark.parametrize(
    "my_uid,reference,expected",
    [
        (0, Owner(1001, 1001), Owner(1001, 1001)),  # the container's root, a runner of its own user
        (0, Owner(0, 0), None),  # a runner that is root itself: nothing to give back
        (1001, Owner(1001, 1001), None),  # not root: no owner can be changed (a job on the runner itself)
    ],
)
def test_files_are_handed_back_only_by_root_to_a_runner_that_is_not_root(
    my_uid: int, reference: Owner, expected: Owner | None
) -> None:
    assert owner_to_restore(my_uid, reference) == expected


def test_hand_back_changes_nothing_for_a_runner_that_is_root_and_removes_the_blocks_directory(tmp_path: Path) -> None:
    reference = tmp_path / "work"
    reference.mkdir()
    os.chown(reference, os.geteuid(), os.getegid())  # the runner's own user is this test's
    workdir = tmp_path / "temp" / "guide-workdir"
    (workdir / "clone").mkdir(parents=True)
    kept = tmp_path / "workspace" / "report.json"
    kept.parent.mkdir()
    kept.write_text("{}")
    before = kept.stat()
    args = ["hand-back", "--reference", str(reference), "--remove", str(workdir), str(kept.parent)]
    done = job_command(*args, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert not workdir.exists(), "the guide's clones and builds are gone"
    assert (kept.stat().st_uid, kept.stat().st_gid) == (before.st_uid, before.st_gid)
    if os.geteuid() == 0:
        assert "nothing to hand back" in done.stdout
    missing = job_command("hand-back", cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    assert missing.returncode == 2 and "give --reference DIR" in missing.stderr


def test_stop_says_when_the_harness_had_ended_with_its_reports(tmp_path: Path) -> None:
    """A harness that a signal of its own reached first (act's SIGHUP on the host) has ended and removed its pid
    file by the time the stop step runs: nothing to stop, and the reports are said to be there."""
    outputs = tmp_path / "report" / "outputs"
    outputs.mkdir(parents=True)
    done = job_command("stop", "--output-dir", "report/outputs", cwd=tmp_path, env=dict(os.environ))
    assert (done.returncode, done.stdout) == (
        0,
        "no harness is running (no report/outputs/harness.pid, and no harness with --output-dir report/outputs)\n",
    )
    (outputs / "results.json").write_text("{}")
    done = job_command("stop", "--output-dir", "report/outputs", cwd=tmp_path, env=dict(os.environ))
    assert (done.returncode, done.stdout) == (
        0,
        "no harness is running: it had ended, and its reports are in report/outputs\n",
    )


# A stand-in harness as its command line shows it (`python -m ci.run --output-dir DIR`) that ignores SIGTERM:
# the bound on the wait is what ends the stop.
DEAF_HARNESS = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path("deaf-started").touch()
time.sleep(600)
"""


def test_stop_gives_up_after_its_bound_on_a_harness_that_does_not_end(
    tmp_path: Path, harness_env: dict[str, str]
) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "__init__.py").write_text("")
    (tmp_path / "ci" / "run.py").write_text(DEAF_HARNESS)
    deaf = subprocess.Popen(
        [sys.executable, "-m", "ci.run", "g.md", "--output-dir", "report/outputs"],
        cwd=tmp_path,
        env=harness_env,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (tmp_path / "deaf-started").exists(), "the stand-in ignoring SIGTERM")
        env = {**harness_env, "GITHUB_ACTIONS": "true"}
        done = job_command("stop", "--output-dir", "report/outputs", "--wait-s", "0.3", cwd=tmp_path, env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"found the harness (pid {deaf.pid}) by its command line" in done.stdout
        assert f"::warning title=harness still running::the harness (pid {deaf.pid}) did not stop within 0.3 s" in (
            done.stdout
        )
        assert deaf.poll() is None
    finally:
        deaf.send_signal(signal.SIGKILL)
        deaf.wait(timeout=60)
