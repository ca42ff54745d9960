"""`guide-guard-job`: the commands a workflow's job runs around the harness (prepare, stop, hand-back)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ci.cli import ExitCode, command_parser, fail, print_error
from ci.job.handback import hand_back, hand_back_job, report_lines
from ci.job.prepare import PrepareError, prepare
from ci.job.stop import Stopped, stop_harness
from ci.report.github import escape_data, escape_property, in_github_actions, output_entry

__all__ = ["STOP_WAIT_S", "build_parser", "main"]

STOP_WAIT_S = 30.0  # how long `stop` waits for the harness's reports; the workflow's step gives it 1 minute


def _unhandled(stopped: NoReturn) -> NoReturn:  # typing.assert_never is Python 3.11+
    raise AssertionError(f"unhandled stop {stopped!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.job.cli",
        description="What a workflow's job does around the harness: prepare the run, stop it, hand files back.",
        epilog="Exit status: 0 done; 1 the harness did not stop in time; 2 usage error or an input the run cannot take.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    prepared = commands.add_parser(
        "prepare",
        help="the harness's deadline below the job's limit, the blocks' directory, the Hub mirror",
        description=(
            "Write the step outputs deadline, workdir (created) and resume-dir ($GITHUB_OUTPUT), and HF_ENDPOINT for "
            "later steps ($GITHUB_ENV) when a mirror is given; refuse a job limit no longer than the margin."
        ),
    )
    prepared.add_argument("--job-timeout-minutes", required=True, metavar="MINUTES", help="the job's timeout-minutes")
    prepared.add_argument(
        "--margin-minutes", required=True, type=int, metavar="MINUTES", help="what the job needs outside the harness"
    )
    prepared.add_argument("--workdir", required=True, metavar="DIR", help="the directory the blocks run in (created)")
    prepared.add_argument("--hub-mirror", default="", metavar="URL", help="HF_ENDPOINT for the blocks; empty: none")
    prepared.add_argument("--resume-dir", default="", metavar="DIR", help="where the reports to resume go; empty: none")
    stop = commands.add_parser(
        "stop",
        help="stop the harness that writes to --output-dir (a cancelled container job) and wait for its reports",
        description=(
            "Find the harness by its pid file in --output-dir, else by its command line and working directory; "
            "send it SIGTERM, as Ctrl-C would, and wait for it to end."
        ),
    )
    stop.add_argument("--output-dir", required=True, metavar="DIR", help="the harness's --output-dir")
    stop.add_argument(
        "--wait-s",
        type=float,
        default=STOP_WAIT_S,
        metavar="SECONDS",
        help=f"how long to wait (default {STOP_WAIT_S:g})",
    )
    handed = commands.add_parser(
        "hand-back",
        help="give what root wrote in the job's directories back to the runner's user",
        description=(
            "As root, give every file under PATH (default: $GITHUB_WORKSPACE, $RUNNER_TEMP, $HOME) to the owner of "
            "--reference (default: the workspace's parent, which the runner made); symbolic links are not followed."
        ),
    )
    handed.add_argument("paths", nargs="*", metavar="PATH", help="the trees to hand back")
    handed.add_argument("--reference", metavar="DIR", help="the directory whose owner gets the files")
    handed.add_argument("--remove", action="append", default=[], metavar="DIR", help="remove DIR first (repeatable)")
    return parser


def _say_problem(kind: str, title: str, message: str) -> None:
    """A problem as an annotation under Actions, else as an `[ERROR]` (or warning) line."""
    if in_github_actions():
        print(f"::{kind} title={escape_property(title)}::{escape_data(message)}", flush=True)
    elif kind == "error":
        print_error(message)
    else:
        print(f"[WARNING] {message}", file=sys.stderr, flush=True)


def _append(variable: str, text: str) -> None:
    """Append TEXT to the runner's file named by VARIABLE; outside Actions, print it."""
    target = os.environ.get(variable)
    if not target:
        print(text, end="")
        return
    with open(target, "a", encoding="utf-8") as file:
        file.write(text)


def _prepare(args: argparse.Namespace) -> int:
    try:
        prepared = prepare(
            args.job_timeout_minutes, args.margin_minutes, args.workdir, args.hub_mirror, args.resume_dir
        )
    except PrepareError as problem:
        _say_problem("error", problem.title, str(problem))
        return ExitCode.USAGE
    Path(prepared.workdir).mkdir(parents=True, exist_ok=True)
    _append("GITHUB_OUTPUT", "".join(output_entry(name, value) for name, value in prepared.outputs().items()))
    if prepared.environment():
        _append("GITHUB_ENV", "".join(output_entry(name, value) for name, value in prepared.environment().items()))
    print(f"the harness's deadline: {prepared.deadline}; the blocks run in {prepared.workdir}")
    return ExitCode.OK


def _stop(args: argparse.Namespace) -> int:
    output_dir = args.output_dir
    result = stop_harness(Path(output_dir), args.wait_s)
    for note in result.notes:
        print(note)
    match result.stopped:
        case Stopped.NOTHING_RUNNING:
            print(f"no harness is running (no {output_dir}/harness.pid, and no harness with --output-dir {output_dir})")
        case Stopped.ALREADY_ENDED:
            # a signal of its own reached it first (a runner's SIGINT on the runner itself; act's SIGHUP)
            print(f"no harness is running: it had ended, and its reports are in {output_dir}")
        case Stopped.WITH_REPORTS:
            print(f"the harness (pid {result.pid}) stopped; its reports are in {output_dir}")
        case Stopped.WITHOUT_REPORTS:
            # ended by the signal itself, before it handled signals: it had not started a block either
            print(
                f"the harness (pid {result.pid}) stopped without writing {output_dir}/results.json:"
                " stopped while starting, it had run no block"
            )
        case Stopped.STILL_RUNNING:
            _say_problem(
                "warning",
                "harness still running",
                f"the harness (pid {result.pid}) did not stop within {args.wait_s:g} s of SIGTERM; its reports may be incomplete",
            )
            return ExitCode.FAILED
        case _:
            _unhandled(result.stopped)
    return ExitCode.OK


def _hand_back(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    remove = [Path(directory) for directory in args.remove]
    try:
        if args.reference is None and not args.paths:
            if not os.environ.get("GITHUB_WORKSPACE"):
                return fail(
                    "give --reference DIR and PATHs, or run this in a job, where GITHUB_WORKSPACE is set", parser
                )
            done = hand_back_job(os.environ, remove)
        else:
            workspace = os.environ.get("GITHUB_WORKSPACE")
            if args.reference is None and not workspace:
                return fail("give --reference DIR, or run this in a job, where GITHUB_WORKSPACE is set", parser)
            reference = Path(args.reference) if args.reference is not None else Path(str(workspace)).parent
            done = hand_back([Path(path) for path in args.paths], reference, remove)
    except OSError as error:
        return fail(f"{error.filename}: {error.strerror}: give an existing --reference directory")
    print("\n".join(report_lines(done)))
    return ExitCode.OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "prepare":
        return _prepare(args)
    if args.command == "stop":
        return _stop(args)
    return _hand_back(args, parser)


if __name__ == "__main__":
    sys.exit(main())
