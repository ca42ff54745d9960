"""The loop that keeps an ephemeral self-hosted runner registered: token, config.sh, run.sh, clean up, again."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from ci.cli import print_error
from ci.runner_service.github import Credentials, RegistrationError, RunnerScope, runner_token

__all__ = ["ServiceSettings", "backoff_s", "clean_work_directory", "serve"]

# config.sh reads each of its options from ACTIONS_RUNNER_INPUT_<NAME> too: the token goes there, where other
# users of the host cannot read it (a command line is visible to all of them in /proc)
TOKEN_VARIABLE = "ACTIONS_RUNNER_INPUT_TOKEN"
# what config.sh writes when it registers, and an ephemeral runner deletes once its job is done
REGISTRATION_FILE = ".runner"
# the registration's local files, as the runner deletes them itself (after an ephemeral job, or `config.sh remove`);
# removed here when `config.sh remove` fails (the runner is already gone on GitHub's side)
_REGISTRATION_FILES = (".runner", ".runner_migrated", ".credentials", ".credentials_migrated", ".credentials_rsaparams")
# how often a wait on the runner's script looks whether a stop signal has come meanwhile
_POLL_S = 0.5


@dataclass(frozen=True)
class ServiceSettings:
    """What the loop registers, where, and how it behaves."""

    runner_dir: Path  # the unpacked actions-runner: config.sh, run.sh, and the registration's files
    scope: RunnerScope  # the organisation or repository the runner registers with
    credentials: Credentials  # how registration tokens are obtained
    api_url: str  # GitHub's REST API, e.g. https://api.github.com
    web_url: str  # GitHub's web address the runner's --url starts with, e.g. https://github.com
    name: str  # the runner's name (--replace takes over a registration of the same name)
    labels: tuple[str, ...]  # the labels jobs choose the runner by (besides self-hosted, Linux, ARM64/X64)
    runner_group: str | None  # the organisation's runner group; None: the default group
    work_dir: Path  # the runner's work directory (config.sh --work), emptied after each job unless keep_work
    keep_work: bool  # leave the work directory as the job left it
    jobs: int | None  # stop after this many runner sessions; None: run until stopped
    first_backoff_s: float  # the wait after the first failure in a row; doubled after each further one
    backoff_limit_s: float  # the longest wait between attempts
    stop_grace_s: float  # after a stop signal, how long run.sh has to end its job before it is killed


def backoff_s(failures: int, first_s: float, limit_s: float) -> float:
    """The wait after FAILURES failures in a row (1 or more): FIRST_S, doubled each time, at most LIMIT_S."""
    return min(limit_s, first_s * 2.0 ** min(failures - 1, 62))


def clean_work_directory(work_dir: Path) -> list[Path]:
    """Remove everything under WORK_DIR (kept itself); the paths that could not be removed, outermost last.

    A directory without write permission that this user owns is made writable first; what belongs to
    another user (root's files from a container job whose hand-back did not run) stays, and is returned.
    """
    leftovers: list[Path] = []
    if work_dir.is_dir():
        _make_writable(work_dir)
        for entry in sorted(work_dir.iterdir()):
            _remove(entry, leftovers)
    return leftovers


def serve(settings: ServiceSettings) -> int:
    """Register, run, clean up and register again until stopped (SIGTERM, SIGINT, SIGHUP) or `jobs` are done.

    Exit status 0 when stopped or done. A failure (no token, config.sh failing, a runner that ended
    without taking a job) is said on stderr and tried again after a wait that grows each time.
    """
    loop = _Loop(settings)
    with loop.stop_signals():
        return loop.run()


class _Loop:
    """The state of one service: its stop request, the child it is waiting for, its failures in a row."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.stopping = threading.Event()  # set by a stop signal
        self.child: subprocess.Popen[bytes] | None = None  # config.sh or run.sh while it runs
        self.failures = 0  # failures in a row, for the backoff
        self.stop_signal: int | None = None  # the first stop signal that came

    @contextmanager
    def stop_signals(self) -> Iterator[None]:
        stop_signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        previous = {signum: signal.signal(signum, self._on_stop) for signum in stop_signals}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        # nothing is printed here: a handler writing to the stream the interrupted code is writing to would fail
        if self.stop_signal is None:
            self.stop_signal = signum
        self.stopping.set()
        child = self.child
        if child is not None and child.poll() is None:
            # the runner ends its job and its session on SIGINT, as on Ctrl-C; its whole group gets it
            _signal_group(child, signal.SIGINT)

    def run(self) -> int:
        settings = self.settings
        sessions = 0
        print(
            f"runner service: {settings.name} for the {settings.scope.described}, labels {','.join(settings.labels)}",
            flush=True,
        )
        while not self.stopping.is_set() and (settings.jobs is None or sessions < settings.jobs):
            if not self._cycle():
                self.failures += 1
                wait_s = backoff_s(self.failures, settings.first_backoff_s, settings.backoff_limit_s)
                print(f"retrying in {wait_s:g} s (failure {self.failures} in a row)", file=sys.stderr, flush=True)
                self.stopping.wait(wait_s)
                continue
            self.failures = 0
            sessions += 1
        if self.stop_signal is not None:
            print(f"runner service: stopped by {signal.Signals(self.stop_signal).name}", flush=True)
        else:
            print(f"runner service: {sessions} job(s) done", flush=True)
        return 0

    def _cycle(self) -> bool:
        """One registration and the runner's session; False on a failure (already said)."""
        settings = self.settings
        registration = settings.runner_dir / REGISTRATION_FILE
        if registration.exists() and not self._unregister():
            return False
        try:
            token = runner_token("registration", settings.scope, settings.credentials, settings.api_url)
        except RegistrationError as error:
            _say_error(f"no registration token: {error}")
            return False
        if self.stopping.is_set():
            return True
        status = self._child(self._config_arguments(), {TOKEN_VARIABLE: token})
        if status != 0:
            _say_error(f"config.sh exited with {status} (its output is above); the runner is not registered")
            return False
        print(f"registered {settings.name}; waiting for a job", flush=True)
        status = self._child([str(settings.runner_dir / "run.sh")], {})
        consumed = not registration.exists()
        print(f"run.sh exited with {status}", flush=True)
        if not settings.keep_work:
            self._clean()
        if not consumed and not self.stopping.is_set():
            _say_error(
                "the runner ended without finishing an ephemeral job (its registration is still there; "
                "run.sh's output above says why); it is removed and registered again"
            )
            return False
        return True

    def _config_arguments(self) -> list[str]:
        settings = self.settings
        arguments = [
            str(settings.runner_dir / "config.sh"),
            "--unattended",
            "--ephemeral",
            "--replace",
            "--url",
            settings.scope.runner_url(settings.web_url),
            "--name",
            settings.name,
            "--work",
            str(settings.work_dir),
        ]
        if settings.labels:
            arguments += ["--labels", ",".join(settings.labels)]
        if settings.runner_group is not None:
            arguments += ["--runnergroup", settings.runner_group]
        return arguments

    def _unregister(self) -> bool:
        """Remove a registration a stopped runner left (`config.sh remove`, else its local files)."""
        settings = self.settings
        print(f"{REGISTRATION_FILE} is there: removing the previous registration first", flush=True)
        try:
            token = runner_token("remove", settings.scope, settings.credentials, settings.api_url)
        except RegistrationError as error:
            _say_error(f"no removal token: {error}")
            return False
        status = self._child([str(settings.runner_dir / "config.sh"), "remove"], {TOKEN_VARIABLE: token})
        if status != 0:
            # the runner may already be gone on GitHub's side; the next `config.sh --replace` takes over its name
            print(f"config.sh remove exited with {status}: removing the local registration files", flush=True)
            for name in _REGISTRATION_FILES:
                (settings.runner_dir / name).unlink(missing_ok=True)
        return True

    def _child(self, arguments: list[str], extra_environment: Mapping[str, str]) -> int:
        """Run one of the runner's scripts in a process group of its own; its exit status (negative: a signal)."""
        environment = {**os.environ, **extra_environment}
        try:
            child = subprocess.Popen(arguments, cwd=self.settings.runner_dir, env=environment, start_new_session=True)
        except OSError as error:
            _say_error(f"cannot start {arguments[0]}: {error.strerror}; is --runner-dir the unpacked actions-runner?")
            return 127
        self.child = child
        if self.stopping.is_set():
            _signal_group(child, signal.SIGINT)
        deadline: float | None = None  # once stopping: when the child is killed if it has not ended
        try:
            while True:
                if deadline is None and self.stopping.is_set():
                    deadline = time.monotonic() + self.settings.stop_grace_s
                try:
                    return child.wait(timeout=_POLL_S if deadline is None else max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() >= deadline:
                        name = Path(arguments[0]).name
                        _say_error(f"{name} did not end {self.settings.stop_grace_s:g} s after SIGINT: killed")
                        _signal_group(child, signal.SIGKILL)
                        return child.wait()
        finally:
            self.child = None

    def _clean(self) -> None:
        leftovers = clean_work_directory(self.settings.work_dir)
        if leftovers:
            example = leftovers[0]
            owner = _owner(example)
            _say_error(
                f"{len(leftovers)} path(s) under {self.settings.work_dir} could not be removed, e.g. {example}"
                f"{f' (owned by uid {owner})' if owner is not None else ''}: a container job left them and its "
                f"hand-back step did not run; remove them as root (sudo rm -rf {self.settings.work_dir}/*), "
                f"or the next job's checkout may fail"
            )


def _remove(path: Path, leftovers: list[Path]) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            _make_writable(path)
            for child in sorted(path.iterdir()):
                _remove(child, leftovers)
            path.rmdir()
        else:
            path.unlink()
    except OSError:
        leftovers.append(path)


def _make_writable(directory: Path) -> None:
    """Give this user write and search permission on DIRECTORY when it owns it (else leave it as it is)."""
    try:
        mode = directory.lstat().st_mode
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            directory.chmod(mode | stat.S_IRWXU)
    except OSError:
        pass


def _owner(path: Path) -> int | None:
    try:
        return path.lstat().st_uid
    except OSError:
        return None


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(child.pid, signum)


def _say_error(message: str) -> None:
    print_error(message)
