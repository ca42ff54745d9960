"""Run this repository's workflows under nektos/act, the real Actions engine, and read what it reports.

act runs in host mode (`-P LABEL=-self-hosted` for every runner label the workflows name) on a copy of the
working tree, with each pinned third-party action replaced by a stand-in of tests/act/actions through
`--local-repository OWNER/NAME@SHA=DIR`, and its JSON log read back as job results, step outputs, workflow
commands (annotations) and step summaries: what a maintainer looks at on GitHub.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RUNNER_LABELS", "ActProcess", "ActResult", "ActRunner", "pinned_actions"]

REPO = Path(__file__).resolve().parents[2]
STAND_INS = Path(__file__).resolve().parent / "actions"
# Every runner label a workflow or the registry names; host mode runs each on this machine.
RUNNER_LABELS = ("ubuntu-latest", "linux-aarch64-a2-4", "self-hosted")
# What act must not take from the caller: a CI job's own files and identity (tests never write into them).
INHERITED_PREFIXES = ("GITHUB_", "RUNNER_", "ACTIONS_", "ACT_", "INPUT_")
USES = re.compile(r"uses:\s*(actions/[\w.-]+)(/[\w./-]+)?@([0-9a-f]{40})")


def pinned_actions() -> dict[str, str]:
    """{OWNER/NAME: commit} of every third-party action the workflows pin (one commit each: tests/test_workflow_security.py)."""
    pins: dict[str, str] = {}
    for path in [*sorted((REPO / ".github" / "workflows").glob("*.yml")), REPO / "action.yml"]:
        for repository, _subpath, commit in USES.findall(path.read_text(encoding="utf-8")):
            pins[repository] = commit
    return pins


@dataclass
class ActResult:
    """A finished act run: its exit status, its JSON log records and the stand-ins' store."""

    returncode: int
    records: list[dict[str, Any]]
    store: Path
    log_file: Path
    run_id: str  # github.run_id: the artifacts are this run's

    def _of(self, job: str) -> Iterator[dict[str, Any]]:
        for record in self.records:
            if job_name(record) == job:
                yield record

    def jobs(self) -> dict[str, str]:
        """{job name as act shows it (`caller/workflow/job`, stripped): result} of every job that ran."""
        return {job_name(record): record["jobResult"] for record in self.records if "jobResult" in record}

    def job(self, name: str) -> str:
        results = self.jobs()
        assert name in results, f"no job {name!r} ran; jobs: {results}\nlog: {self.log_file}"
        return results[name]

    def step_results(self, job: str) -> dict[str, str]:
        """{step name: result} of a job's main steps."""
        return {
            record["step"]: record["stepResult"]
            for record in self._of(job)
            if "stepResult" in record and record.get("stage") == "Main"
        }

    def outputs(self, job: str, step_id: str) -> dict[str, str]:
        """The outputs a step of a job set (its GITHUB_OUTPUT), by name."""
        found: dict[str, str] = {}
        for record in self._of(job):
            if record.get("command") == "set-output" and (record.get("stepID") or [None])[0] == step_id:
                found[record["name"]] = record["arg"]
        return found

    def commands(self, job: str, command: str) -> list[dict[str, Any]]:
        """The workflow commands of a kind (`error`, `warning`, `add-path`, ...) a job's steps issued."""
        return [record for record in self._of(job) if record.get("command") == command]

    def summaries(self, job: str) -> list[str]:
        return [record["content"] for record in self._of(job) if record.get("command") == "summary"]

    def output_text(self, job: str) -> str:
        """Everything the job's steps printed, in order."""
        return "".join(record["msg"] for record in self._of(job) if record.get("raw_output"))

    def why(self) -> str:
        """What went wrong, for an assertion's message: each failed job, its failed steps, the end of its output."""
        failed = [job for job, result in self.jobs().items() if result != "success"]
        lines = [f"act exited {self.returncode}; log: {self.log_file}"]
        for job in failed:
            steps = [step for step, result in self.step_results(job).items() if result != "success"]
            tail = self.output_text(job).splitlines()[-20:]
            lines += [f"job {job!r} failed, at {steps or 'no main step'}; its last lines:", *tail]
        errors = [str(record.get("msg", "")) for record in self.records if record.get("level") == "error"]
        return "\n".join(lines + [f"act error: {message}" for message in errors[-10:]])

    def artifact(self, name: str) -> Path:
        path = self.store / "artifacts" / self.run_id / name
        assert path.is_dir(), f"no artifact {name!r}; uploaded: {sorted(p.name for p in path.parent.glob('*'))}"
        return path


def job_name(record: dict[str, Any]) -> str:
    return str(record.get("job", "")).strip()


@dataclass
class ActRunner:
    """act with the stand-ins, on its own copy of the working tree, with its state under `base`."""

    act: str
    base: Path
    event: str = "workflow_dispatch"
    workflow: str = ".github/workflows/guides.yml"
    inputs: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    payload: dict[str, Any] | None = None
    extra_args: list[str] = field(default_factory=list)
    docker_host: str | None = None  # a container engine's socket (engine.py): `container:` jobs run there

    def __post_init__(self) -> None:
        self.workspace = self.base / "repository"
        self.store = self.base / "store"
        self.store.mkdir(parents=True, exist_ok=True)
        copy_working_tree(REPO, self.workspace)
        self.actions = install_stand_ins(self.base / "actions")

    def commit(self, message: str) -> str:
        """Commits the workspace as it is now (a pull request's head); returns the commit."""
        git = ["git", "-c", "user.name=act scenario", "-c", "user.email=act@example.invalid"]
        subprocess.run([*git, "commit", "-q", "-a", "-m", message], cwd=self.workspace, check=True)
        return self.head()

    def commit_edits(self) -> None:
        """What the scenario changed in the workspace, committed: the jobs check out commits."""
        status = ["git", "status", "--porcelain"]
        if subprocess.run(status, cwd=self.workspace, check=True, capture_output=True, text=True).stdout:
            subprocess.run(["git", "add", "-A"], cwd=self.workspace, check=True)
            self.commit("the scenario's edits")

    def head(self) -> str:
        command = ["git", "rev-parse", "HEAD"]
        return subprocess.run(command, cwd=self.workspace, check=True, capture_output=True, text=True).stdout.strip()

    def command(self, log_name: str) -> list[str]:
        argv = [self.act, self.event, "-W", self.workflow, "-C", str(self.workspace), "--json", "--no-cache-server"]
        for label in RUNNER_LABELS:
            argv += ["-P", f"{label}=-self-hosted"]
        for repository, commit in pinned_actions().items():
            argv += ["--local-repository", f"{repository}@{commit}={self.actions / repository}"]
        argv += ["--action-cache-path", str(self.base / f"act-cache-{log_name}")]
        # the checkout stand-in clones the repository as the real one fetches it: act's own copy of the working
        # directory would skip the checkout steps, and leaves nothing at all in a host job under --bind
        argv += ["--no-skip-checkout", "--env", f"ACT_STANDIN_REPOSITORY={self.workspace}"]
        argv += ["--env", f"ACT_STANDIN_STORE={self.store}"]
        for flag, values in (("--input", self.inputs), ("--var", self.variables), ("--secret", self.secrets)):
            for name, value in values.items():
                argv += [flag, f"{name}={value}"]
        for name, value in self.env.items():
            argv += ["--env", f"{name}={value}"]
        if self.payload is not None:
            event_file = self.base / f"event-{log_name}.json"
            event_file.write_text(json.dumps(self.payload), encoding="utf-8")
            argv += ["--eventpath", str(event_file)]
        if self.docker_host is not None:
            # a container job as on a self-hosted runner (tests/act/README.md): the local image as it is, the
            # workspace bound at the host's path, the container removed with what runs in it, no engine
            # socket inside it
            argv += ["--pull=false", "--bind", "--rm", "--container-daemon-socket=-"]
        return argv + self.extra_args

    def environment(self) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if not name.startswith(INHERITED_PREFIXES)}
        # no ~/.config/act/actrc of this machine's
        env["XDG_CONFIG_HOME"] = str(self.base / "config")
        if self.docker_host is not None:
            env["DOCKER_HOST"] = self.docker_host
        return env

    def start(self, log_name: str = "run") -> ActProcess:
        self.commit_edits()
        log_file = self.base / f"act-{log_name}.jsonl"
        log = log_file.open("wb")
        process = subprocess.Popen(
            self.command(log_name),
            cwd=self.workspace,
            env=self.environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        # act's github.run_id is 1 unless the scenario gives one
        return ActProcess(process, log_file, self.store, self.env.get("GITHUB_RUN_ID", "1"))

    def run(self, log_name: str = "run", timeout_s: float = 600) -> ActResult:
        return self.start(log_name).wait(timeout_s)


@dataclass
class ActProcess:
    """An act run in progress."""

    process: subprocess.Popen[bytes]
    log_file: Path
    store: Path
    run_id: str

    def wait_for(self, text: str, timeout_s: float = 300) -> None:
        """Waits until the log holds `text` (act prints as it goes); fails if act ends first."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log_file.read_text(encoding="utf-8", errors="replace"):
            if self.process.poll() is not None:
                raise AssertionError(f"act ended ({self.process.returncode}) before printing {text!r}: {self.log_file}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"act did not print {text!r} within {timeout_s} s: {self.log_file}")
            time.sleep(0.2)

    def interrupt(self) -> None:
        """Ctrl-C, as a maintainer's cancel reaches act."""
        self.process.send_signal(signal.SIGINT)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def wait(self, timeout_s: float = 600) -> ActResult:
        try:
            returncode = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        finally:
            # nothing act started may outlive it (its steps run in its process group in host mode)
            self.kill()
        return ActResult(returncode, read_records(self.log_file), self.store, self.log_file, self.run_id)


def read_records(log_file: Path) -> list[dict[str, Any]]:
    records = []
    for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a step's raw line that only looks like JSON
    return records


def copy_working_tree(source: Path, target: Path) -> None:
    """The repository's files as they are now (committed or not, ignored ones left out) in a git repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        relative = Path(os.fsdecode(name))
        origin = source / relative
        if not origin.exists() and not origin.is_symlink():
            continue  # deleted in the working tree
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, target / relative, follow_symlinks=False)
    identity = ["-c", "user.name=act scenario", "-c", "user.email=act@example.invalid"]
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], [*identity, "commit", "-q", "-m", "the base"]):
        subprocess.run(["git", *argv], cwd=target, check=True, capture_output=True)


def install_stand_ins(target: Path) -> Path:
    """tests/act/actions laid out as act reads local repositories, with standin.py in each action.

    act copies an action's directory and nothing beside it (a symbolic link is copied as a link).
    """
    layout = {repository: repository.split("/", 1)[1] for repository in pinned_actions()}
    for repository, folder in layout.items():
        shutil.copytree(STAND_INS / folder, target / repository, dirs_exist_ok=True)
        for action_file in (target / repository).rglob("action.yml"):
            shutil.copy2(STAND_INS / "standin.py", action_file.parent / "standin.py")
    return target
