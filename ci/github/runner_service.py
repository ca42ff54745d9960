"""`guide-guard-runner-service`: the loop that keeps an ephemeral self-hosted runner registered (token, config.sh,
run.sh, clean up, again), and its command line."""

from __future__ import annotations

import argparse
import getpass
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType

from ci.base import frozen
from ci.base.text import first_control
from ci.cli import ExitCode, command_parser, fail, guarded_command, print_error
from ci.github.api import AppCredentials, Credentials, RegistrationError, RunnerScope, TokenCredentials, runner_token

__all__ = ["ServiceSettings", "backoff_s", "build_parser", "clean_work_directory", "main", "serve", "systemd_unit"]

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


@frozen
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
            print_error(f"no registration token: {error}")
            return False
        if self.stopping.is_set():
            return True
        status = self._child(self._config_arguments(), {TOKEN_VARIABLE: token})
        if status != 0:
            print_error(f"config.sh exited with {status} (its output is above); the runner is not registered")
            return False
        print(f"registered {settings.name}; waiting for a job", flush=True)
        status = self._child([str(settings.runner_dir / "run.sh")], {})
        consumed = not registration.exists()
        print(f"run.sh exited with {status}", flush=True)
        if not settings.keep_work:
            self._clean()
        if not consumed and not self.stopping.is_set():
            print_error(
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
            print_error(f"no removal token: {error}")
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
            print_error(f"cannot start {arguments[0]}: {error.strerror}; is --runner-dir the unpacked actions-runner?")
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
                        print_error(f"{name} did not end {self.settings.stop_grace_s:g} s after SIGINT: killed")
                        _signal_group(child, signal.SIGKILL)
                        return child.wait()
        finally:
            self.child = None

    def _clean(self) -> None:
        leftovers = clean_work_directory(self.settings.work_dir)
        if leftovers:
            example = leftovers[0]
            owner = _owner(example)
            print_error(
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


MODULE = "ci.github.runner_service"


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        MODULE,
        description=(
            "Keep an ephemeral self-hosted runner taking jobs: get a fresh registration token from GitHub's API, "
            "run config.sh --ephemeral --unattended --replace, run.sh (one job), empty the work directory, repeat. "
            "Tokens are never printed nor put on a command line."
        ),
        epilog=(
            "Exit status: 0 stopped by SIGTERM/SIGINT/SIGHUP or --jobs done; 2 usage error. "
            "Failures (no token, config.sh failing) are said on stderr and retried after a growing wait."
        ),
    )
    _add_registration_options(parser)
    _add_service_options(parser)
    return parser


def _add_registration_options(parser: argparse.ArgumentParser) -> None:
    """Where the runner registers, with which credentials, as which runner."""
    where = parser.add_argument_group("where the runner registers (one of)")
    scope = where.add_mutually_exclusive_group(required=True)
    scope.add_argument("--org", metavar="ORG", help="an organisation's runner (runner groups: --runner-group)")
    scope.add_argument("--repo", metavar="OWNER/NAME", help="a repository's runner")
    credentials = parser.add_argument_group(
        "credentials (one of): a file readable by the runner's user only, read again at every registration"
    )
    credentials.add_argument(
        "--token-file",
        metavar="FILE",
        help="a fine-grained token: 'Administration: read and write' on the repository, "
        "or 'Self-hosted runners: read and write' on the organisation",
    )
    credentials.add_argument("--app-id", metavar="ID", help="a GitHub App's ID or client ID (with --app-key)")
    credentials.add_argument("--app-key", metavar="FILE", help="the GitHub App's private key (PEM)")
    runner = parser.add_argument_group("the runner")
    runner.add_argument(
        "--runner-dir", metavar="DIR", default=".", help="the unpacked actions-runner (default: this directory)"
    )
    runner.add_argument("--name", default=socket.gethostname(), help="the runner's name (default: the host name)")
    runner.add_argument("--labels", default="", metavar="L1,L2", help="its labels, comma-separated")
    runner.add_argument("--runner-group", metavar="GROUP", help="the organisation's runner group (default: Default)")
    runner.add_argument(
        "--work", metavar="DIR", default="_work", help="the work directory (default: _work in --runner-dir)"
    )
    runner.add_argument("--keep-work", action="store_true", help="do not empty the work directory after each job")


def _add_service_options(parser: argparse.ArgumentParser) -> None:
    """How the loop behaves."""
    service = parser.add_argument_group("the service")
    service.add_argument("--jobs", type=int, metavar="N", help="stop after N jobs (default: run until stopped)")
    service.add_argument(
        "--api-url",
        default=os.environ.get("GITHUB_API_URL") or "https://api.github.com",
        help="GitHub's REST API (default: $GITHUB_API_URL, else https://api.github.com)",
    )
    service.add_argument(
        "--github-url",
        default=os.environ.get("GITHUB_SERVER_URL") or "https://github.com",
        help="GitHub's web address (default: $GITHUB_SERVER_URL, else https://github.com)",
    )
    service.add_argument(
        "--backoff-s", type=float, default=15.0, metavar="S", help="the wait after a first failure (doubled each time)"
    )
    service.add_argument(
        "--backoff-limit-s", type=float, default=900.0, metavar="S", help="the longest wait between attempts"
    )
    service.add_argument(
        "--stop-grace-s",
        type=float,
        default=60.0,
        metavar="S",
        help="after SIGTERM, how long the runner has to end its job before it is killed (default 60)",
    )
    service.add_argument(
        "--systemd-unit",
        action="store_true",
        help="print a systemd unit that runs this command with these options as this user, and exit",
    )


@guarded_command()
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    credentials = _credentials(args)
    if isinstance(credentials, str):
        return fail(credentials, parser)
    if args.repo is not None:
        owner, _, name = args.repo.partition("/")
        if not owner or not name or "/" in name:
            return fail(f"--repo {args.repo!r} is not OWNER/NAME", parser)
        scope = RunnerScope(owner, name)
    else:
        scope = RunnerScope(args.org, None)
    if scope.repository is not None and args.runner_group is not None:
        return fail("--runner-group is for an organisation's runner (--org); a repository has no runner groups", parser)
    if args.jobs is not None and args.jobs < 1:
        return fail(f"--jobs {args.jobs}: give 1 or more", parser)
    for option in ("backoff_s", "backoff_limit_s", "stop_grace_s"):
        if getattr(args, option) <= 0:
            return fail(f"--{option.replace('_', '-')} {getattr(args, option):g}: give a positive number", parser)
    runner_dir = Path(args.runner_dir).absolute()
    if not (runner_dir / "config.sh").is_file() or not (runner_dir / "run.sh").is_file():
        return fail(
            f"{runner_dir} has no config.sh and run.sh: give --runner-dir, the directory the actions-runner "
            "archive was unpacked into"
        )
    work_dir = (runner_dir / args.work).resolve()
    if not args.keep_work:
        problem = _work_problem(work_dir, runner_dir.resolve(), credentials)
        if problem:
            return fail(problem, parser)
    labels = tuple(label.strip() for label in args.labels.split(",") if label.strip())
    settings = ServiceSettings(
        runner_dir=runner_dir,
        scope=scope,
        credentials=credentials,
        api_url=args.api_url.rstrip("/"),
        web_url=args.github_url.rstrip("/"),
        name=args.name,
        labels=labels,
        runner_group=args.runner_group,
        work_dir=work_dir,
        keep_work=args.keep_work,
        jobs=args.jobs,
        first_backoff_s=args.backoff_s,
        backoff_limit_s=max(args.backoff_limit_s, args.backoff_s),
        stop_grace_s=args.stop_grace_s,
    )
    if args.systemd_unit:
        problem = _unit_problem(settings)
        if problem:
            return fail(problem, parser)
        print(systemd_unit(settings, getpass.getuser()), end="")
        return ExitCode.OK
    return serve(settings)


def _credentials(args: argparse.Namespace) -> Credentials | str:
    """The credentials the options name, else the usage error to report."""
    if args.token_file is not None and (args.app_id is not None or args.app_key is not None):
        return "give either --token-file or --app-id with --app-key, not both"
    if args.token_file is not None:
        return TokenCredentials(Path(args.token_file).absolute())
    if args.app_id is not None and args.app_key is not None:
        return AppCredentials(args.app_id, Path(args.app_key).absolute())
    if args.app_id is not None or args.app_key is not None:
        return "a GitHub App needs both --app-id and --app-key"
    return "no credentials: give --token-file FILE (a fine-grained token) or --app-id ID --app-key FILE (a GitHub App)"


def _unit_literal(text: str) -> str:
    """TEXT as a unit file's value holds it literally: systemd expands `%H` and the like (its specifiers) in
    Description, User, WorkingDirectory and ExecStart, and `%%` is a percent sign."""
    return text.replace("%", "%%")


# what makes systemd read a word of a command line otherwise than as written, unless it is quoted: whitespace
# between words, quotes, a backslash's escapes (systemd.syntax(7), "Quoting"), `;` between two command lines
_NEEDS_QUOTES = frozenset(" \t\n\r\"'\\;")


def _exec_word(word: str, *, expanded: bool = True) -> str:
    """WORD as one word of an Exec line, which systemd hands over unchanged (systemd.service(5), "Command lines").

    Quoted as systemd.syntax(7) says, in double quotes where a backslash escapes (`\\\\`, `\\"`, `\\xNN`);
    `%` written `%%` (a specifier otherwise) and, unless EXPANDED is False (the program's path, which systemd
    never expands), `$` written `$$` (a variable of the environment otherwise).
    """
    literal = _unit_literal(word)
    if expanded:
        literal = literal.replace("$", "$$")
    if literal and not any(character in _NEEDS_QUOTES or not character.isprintable() for character in literal):
        return literal
    escaped = "".join(
        f"\\{character}"
        if character in '"\\'
        else f"\\x{ord(character):02x}"
        if ord(character) < 0x20 or ord(character) == 0x7F
        else character
        for character in literal
    )
    return f'"{escaped}"'


def _exec_line(command: Sequence[str]) -> str:
    """COMMAND as ExecStart's value: the program's path as written; when it holds a `$`, which would be expanded
    in the first argument (argv[0]), the `@` form, which gives the path and argv[0] apart."""
    program, *arguments = command
    words = [_exec_word(argument) for argument in arguments]
    if "$" in program:
        return " ".join(["@" + _exec_word(program, expanded=False), _exec_word(program), *words])
    return " ".join([_exec_word(program, expanded=False), *words])


def systemd_unit(settings: ServiceSettings, user: str) -> str:
    """A systemd unit running the service with SETTINGS as USER, restarted if it ever exits on its own; a name, a
    label or a path stays as written, with its `%`, `$`, quotes or backslashes (systemd.service: "Command lines")."""
    exec_start = _exec_line([sys.executable, "-I", "-m", MODULE, *_options(settings)])
    return "\n".join(
        [
            "[Unit]",
            "Description="
            + _unit_literal(f"GitHub Actions runner {settings.name} (ephemeral, registered again after each job)"),
            "Wants=network-online.target",
            "After=network-online.target docker.service",
            "",
            "[Service]",
            f"User={_unit_literal(user)}",
            f"WorkingDirectory={_unit_literal(str(settings.runner_dir))}",
            f"ExecStart={exec_start}",
            "Restart=always",
            "RestartSec=30",
            # SIGTERM to the service alone: it stops the runner (SIGINT to its group) and waits for it
            "KillMode=mixed",
            f"TimeoutStopSec={int(settings.stop_grace_s) + 30}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def _unit_problem(settings: ServiceSettings) -> str | None:
    """Why SETTINGS cannot be written in a systemd unit: a control character (a newline, a carriage return...) in
    the runner's name or directory, which Description= and WorkingDirectory= take as written, with no quoting
    (systemd.syntax(7)): a newline would end the line, and the rest be read as a setting of its own. None when
    they can be."""
    for option, value, setting, what in (
        ("--name", settings.name, "Description", "name"),
        ("--runner-dir", str(settings.runner_dir), "WorkingDirectory", "directory"),
    ):
        control = first_control(value)
        if control is not None:
            return (
                f"{option} {value!r} holds a control character ({control!r}), which a systemd unit cannot hold:"
                f" its {setting}= line takes the value as written, with no quoting, and would break; give a {what}"
                " without control characters"
            )
    return None


def _options(settings: ServiceSettings) -> list[str]:
    """The command-line options that give SETTINGS back (paths absolute)."""
    scope = settings.scope
    options = ["--org", scope.owner] if scope.repository is None else ["--repo", f"{scope.owner}/{scope.repository}"]
    match settings.credentials:
        case TokenCredentials(token_file):
            options += ["--token-file", str(token_file)]
        case AppCredentials(app_id, key_file):
            options += ["--app-id", app_id, "--app-key", str(key_file)]
    options += ["--runner-dir", str(settings.runner_dir), "--name", settings.name, "--work", str(settings.work_dir)]
    if settings.labels:
        options += ["--labels", ",".join(settings.labels)]
    if settings.runner_group is not None:
        options += ["--runner-group", settings.runner_group]
    if settings.keep_work:
        options.append("--keep-work")
    options += ["--api-url", settings.api_url, "--github-url", settings.web_url]
    options += ["--backoff-s", f"{settings.first_backoff_s:g}", "--backoff-limit-s", f"{settings.backoff_limit_s:g}"]
    options += ["--stop-grace-s", f"{settings.stop_grace_s:g}"]
    if settings.jobs is not None:
        options += ["--jobs", str(settings.jobs)]
    return options


def _work_problem(work_dir: Path, runner_dir: Path, credentials: Credentials) -> str | None:
    """Why the service must not empty WORK_DIR after each job (the runner itself, a home, the credentials would go);
    None when it may."""
    own = [runner_dir, Path.home().resolve(), Path("/")]
    kept = [
        path.resolve()
        for path in (getattr(credentials, "token_file", None), getattr(credentials, "key_file", None))
        if path
    ]
    if any(work_dir == path or work_dir in path.parents for path in own + kept):
        return (
            f"--work {work_dir} holds the runner, a home directory or the credentials, which emptying it after each"
            " job would delete: give a directory of its own (the default, _work, inside --runner-dir), or --keep-work"
        )
    return None


if __name__ == "__main__":
    sys.exit(main())
