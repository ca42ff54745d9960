"""ci/shell/login-profile.bash: the action's steps get a reader's login environment and keep the job's PATH."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "ci" / "shell" / "login-profile.bash"


def in_a_step(script: str, home: Path, path: str, options: str = "-e") -> subprocess.CompletedProcess[str]:
    """`script` as the action's steps run it: bash without profiles, the login profile sourced first."""
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8"}
    command = ["bash", "--noprofile", "--norc", options, "-c", f'source "{PROFILE}"\n{script}']
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def job_bin(tmp_path: Path) -> Path:
    """A directory the job put first on PATH (setup-python's), holding a `python` of its own."""
    directory = tmp_path / "job-bin"
    directory.mkdir()
    python = directory / "python"
    python.write_text("#!/bin/sh\necho the job python\n")
    python.chmod(0o755)
    return directory


def test_the_profiles_are_read_and_the_jobs_path_stays_in_front(tmp_path: Path, job_bin: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    cann = tmp_path / "cann-bin"
    # what a CANN image's profile does: set PATH afresh (as Debian's /etc/profile does) with its tools first
    (home / ".bash_profile").write_text(f'export ASCEND_HOME_PATH=/opt/ascend\nPATH="{cann}:/usr/bin:/bin"\n')
    job_path = f"{job_bin}:/usr/local/bin:/usr/bin:/bin"

    step = in_a_step('echo "$ASCEND_HOME_PATH"; echo "$PATH"; python', home, job_path)

    assert step.returncode == 0, step.stderr
    ascend_home, path, python = step.stdout.splitlines()
    assert ascend_home == "/opt/ascend"
    entries = path.split(":")
    # the job's entries the profile dropped come first, in the job's order; the profile's order after them
    assert entries[0] == str(job_bin)
    assert entries.index("/usr/local/bin") < entries.index(str(cann)) < entries.index("/usr/bin")
    assert len(entries) == len(set(entries))
    assert python == "the job python"


def test_only_the_first_of_the_home_profiles_is_read_as_bash_l_does(tmp_path: Path, job_bin: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_login").write_text("export READ=bash_login\n")
    (home / ".profile").write_text("export READ=profile\n")

    step = in_a_step('echo "$READ"', home, f"{job_bin}:/usr/bin:/bin")

    assert step.stdout.strip() == "bash_login"


@pytest.mark.parametrize("options", ["-e", "-eu"])
def test_the_steps_shell_options_survive_a_profile_that_breaks_them(
    tmp_path: Path, job_bin: Path, options: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # a profile written for an interactive shell: an unset variable, a failing command
    (home / ".profile").write_text('echo "$UNSET_IN_THE_PROFILE" >/dev/null\nfalse\nexport READ=yes\n')

    step = in_a_step('echo "$READ $-"; false; echo "still running"', home, f"{job_bin}:/usr/bin:/bin", options)

    assert step.returncode == 1  # errexit is back on: `false` ends the step
    read, flags = step.stdout.split()
    assert read == "yes"
    assert ("u" in flags) == ("u" in options)
    assert "still running" not in step.stdout


def test_an_empty_entry_of_the_jobs_path_is_not_put_in_front(tmp_path: Path, job_bin: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".profile").write_text("PATH=/usr/bin:/bin\n")

    step = in_a_step('echo "$PATH"', home, f"{job_bin}::/usr/bin:/bin")

    assert step.stdout.strip() == f"{job_bin}:/usr/bin:/bin"


def test_the_action_sources_it_in_every_step_that_installs_checks_or_runs_the_harness() -> None:
    action = (REPO / "action.yml").read_text(encoding="utf-8")
    # install, check, run; not the step that hands the named secrets over, which holds all the job's secrets
    assert action.count('source "$GITHUB_ACTION_PATH/ci/shell/login-profile.bash"') == 3
    # a login shell would read the profiles before the script could keep the job's PATH
    assert "bash -el" not in action
