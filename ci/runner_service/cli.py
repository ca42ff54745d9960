"""Command line: `guide-guard-runner-service` keeps an ephemeral self-hosted runner registered, one job at a time."""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from ci.cli import ExitCode, command_parser, fail, guarded_command
from ci.runner_service.github import AppCredentials, Credentials, RunnerScope, TokenCredentials
from ci.runner_service.service import ServiceSettings, serve

__all__ = ["build_parser", "main", "systemd_unit"]

MODULE = "ci.runner_service"


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


def systemd_unit(settings: ServiceSettings, user: str) -> str:
    """A systemd unit running the service with SETTINGS as USER, restarted if it ever exits on its own."""
    command = [sys.executable, "-I", "-m", MODULE, *_options(settings)]
    return "\n".join(
        [
            "[Unit]",
            f"Description=GitHub Actions runner {settings.name} (ephemeral, registered again after each job)",
            "Wants=network-online.target",
            "After=network-online.target docker.service",
            "",
            "[Service]",
            f"User={user}",
            f"WorkingDirectory={settings.runner_dir}",
            f"ExecStart={shlex.join(command)}",
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
