"""`guide-guard-job`: the commands a workflow's job runs around the harness: prepare (the deadline below the job's
limit, the directories, the Hub mirror), stop (a harness the runner cannot signal), hand-back (ci.github.handback)."""

from __future__ import annotations

import argparse
import contextlib
import enum
import itertools
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

import psutil

from ci.base import frozen
from ci.base.signals import PID_FILE
from ci.cli import ExitCode, command_parser, fail, print_error
from ci.github.handback import hand_back, hand_back_job, report_lines
from ci.report.github import escape_data, escape_property, in_github_actions, output_entry

__all__ = [
    "HARNESS_SCRIPT",
    "STOP_WAIT_S",
    "PrepareError",
    "Prepared",
    "StopResult",
    "Stopped",
    "build_parser",
    "deadline_minutes",
    "find_harness",
    "is_harness_command",
    "main",
    "prepare",
    "stop_harness",
]

STOP_WAIT_S = 30.0  # how long `stop` waits for the harness's reports; the workflow's step gives it 1 minute


def _unhandled(stopped: NoReturn) -> NoReturn:  # typing.assert_never is Python 3.11+
    raise AssertionError(f"unhandled stop {stopped!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.github.job",
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
    """A problem as an annotation under Actions; an error as an `[ERROR]` line too, a warning outside Actions as a
    warning line."""
    if in_github_actions():
        print(f"::{kind} title={escape_property(title)}::{escape_data(message)}", flush=True)
    if kind == "error":
        print_error(message)
    elif not in_github_actions():
        print(f"[WARNING] {message}", file=sys.stderr, flush=True)


def _append(*writes: tuple[str, str]) -> None:
    """Append each TEXT to the runner's file its VARIABLE names; outside Actions, print it. Every file is opened
    before any is written, so a PrepareError for one that cannot be written leaves the others as they were."""
    with contextlib.ExitStack() as files:
        opened: list[tuple[TextIO | None, str]] = []
        for variable, text in writes:
            target = os.environ.get(variable)
            try:
                opened.append((files.enter_context(open(target, "a", encoding="utf-8")) if target else None, text))
            except OSError as error:
                raise PrepareError(
                    f"${variable}",
                    f"cannot write ${variable} ({target}): {_why(error)}; run this in a job's step, where the"
                    f" runner sets {variable} to a file of its own, or unset {variable} to have the lines printed",
                ) from None
        for file, text in opened:
            if file is None:
                print(text, end="")
            else:
                file.write(text)


def _why(error: OSError) -> str:
    """What ERROR, met on a path to write, says to a user."""
    if isinstance(error, IsADirectoryError):
        return "it is a directory"
    if isinstance(error, (FileExistsError, NotADirectoryError)):
        return "a file stands where a directory must be"
    return error.strerror or str(error)


def _make_workdir(workdir: str) -> None:
    """The blocks' directory, created; PrepareError when it cannot be."""
    try:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PrepareError(
            "workdir",
            f"cannot create the blocks' directory --workdir {workdir}: {_why(error)}; give a"
            " directory the job's user can create, outside the checkout (the workflow gives $RUNNER_TEMP/guide-workdir)",
        ) from None


def _prepare(args: argparse.Namespace) -> int:
    try:
        prepared = prepare(
            args.job_timeout_minutes, args.margin_minutes, args.workdir, args.hub_mirror, args.resume_dir
        )
        _make_workdir(prepared.workdir)
        outputs = "".join(output_entry(name, value) for name, value in prepared.outputs().items())
        environment = "".join(output_entry(name, value) for name, value in prepared.environment().items())
        _append(("GITHUB_OUTPUT", outputs), *((("GITHUB_ENV", environment),) if environment else ()))
    except PrepareError as problem:
        _say_problem("error", problem.title, str(problem))
        return ExitCode.USAGE
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


# A `number` input of a reusable workflow as GitHub passes it on: digits, maybe a fraction.
_MINUTES = re.compile(r"[0-9]+(\.[0-9]*)?")


class PrepareError(Exception):
    """An input the run cannot start with; `title` names it, the message says what to give instead."""

    def __init__(self, title: str, message: str) -> None:
        super().__init__(message)
        self.title = title


@frozen
class Prepared:
    """What the job's later steps get from the preparation."""

    deadline: str  # the harness's --deadline, in whole minutes (`285m`)
    workdir: str  # the directory the blocks run in
    resume_dir: str | None  # where the reports of the run to resume are downloaded; None for a whole run
    hub_mirror: str | None  # HF_ENDPOINT for the blocks; None when no mirror is set (an empty one breaks the Hub)

    def outputs(self) -> dict[str, str]:
        """The step outputs, by name, as the workflow reads them."""
        written = {"deadline": self.deadline, "workdir": self.workdir}
        if self.resume_dir is not None:
            written["resume-dir"] = self.resume_dir
        return written

    def environment(self) -> dict[str, str]:
        """The variables for the job's later steps ($GITHUB_ENV)."""
        return {} if self.hub_mirror is None else {"HF_ENDPOINT": self.hub_mirror}


def deadline_minutes(job_timeout_minutes: str, margin_minutes: int) -> int:
    """The harness's deadline, in whole minutes, MARGIN_MINUTES below the job's limit.

    A fraction of the limit is dropped, which only moves the deadline earlier. A limit that is no
    number, or no longer than the margin, leaves the harness no time at all: PrepareError, naming the minimum.
    """
    text = job_timeout_minutes.strip()
    left = int(text.split(".")[0]) - margin_minutes if _MINUTES.fullmatch(text) else 0
    if left <= 0:
        raise PrepareError(
            "timeout-minutes too small",
            f"the input timeout-minutes is '{job_timeout_minutes}'; give at least {margin_minutes + 1} (minutes):"
            f" the harness's deadline is DEADLINE_MARGIN_MINUTES ({margin_minutes}) below it (docs/runners.md)",
        )
    return left


def prepare(
    job_timeout_minutes: str, margin_minutes: int, workdir: str, hub_mirror: str, resume_dir: str | None
) -> Prepared:
    """The run's preparation from the job's inputs; PrepareError for one it cannot start with.

    $GITHUB_ENV takes one variable a line, so a mirror holding a line break could set another (LD_PRELOAD=...).
    """
    if "\n" in hub_mirror or "\r" in hub_mirror:
        raise PrepareError("HF_ENDPOINT", "the variable HF_ENDPOINT holds a line break; give the mirror's URL alone")
    minutes = deadline_minutes(job_timeout_minutes, margin_minutes)
    if resume_dir and (blocked := _file_on_the_way(Path(resume_dir))) is not None:
        raise PrepareError(
            "resume-dir",
            f"--resume-dir {resume_dir}: a file stands where a directory must be ({blocked}); give a directory"
            " the job's user can create, outside the checkout",
        )
    return Prepared(f"{minutes}m", workdir, resume_dir or None, hub_mirror or None)


def _file_on_the_way(path: Path) -> Path | None:
    """The first of PATH and its parents that exists, when it is no directory (the reports could not go there)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None


HARNESS_SCRIPT = "guide-guard"  # the console script that is ci.run's main
_HARNESS_MODULES = ("ci.run", "ci")  # `python -m ci` is `python -m ci.run`
_POLL_S = 0.1


class Stopped(enum.Enum):
    """How a stop ended."""

    NOTHING_RUNNING = "nothing_running"  # no harness of this output directory was running, and no report is there
    ALREADY_ENDED = "already_ended"  # none was running, and results.json is there: it had ended on its own
    WITH_REPORTS = "with_reports"  # it ended after the signal, and results.json is there
    WITHOUT_REPORTS = "without_reports"  # it ended without results.json: stopped while starting, no block ran
    STILL_RUNNING = "still_running"  # it had not ended when the wait was over


@frozen
class StopResult:
    """What a stop did, for the step's log."""

    stopped: Stopped  # how it ended
    pid: int | None  # the harness signalled; None when none was found
    notes: tuple[str, ...]  # what was found on the way (a stale pid file, a harness found by its command line)


def is_harness_command(argv: Sequence[str]) -> bool:
    """Whether ARGV starts the harness: `python [options] -m ci.run ...` or the `guide-guard` console script."""
    if any(Path(word).name == HARNESS_SCRIPT for word in argv[:2]):
        return True
    return any(word == "-m" and following in _HARNESS_MODULES for word, following in itertools.pairwise(argv))


def _output_dir_argument(argv: Sequence[str]) -> str | None:
    for index, word in enumerate(argv):
        if word == "--output-dir" and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--output-dir="):
            return word.removeprefix("--output-dir=")
    return None


def _running(process: psutil.Process) -> bool:
    """Alive and still itself (not a zombie whose parent has yet to collect it, not a new process with its pid)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _harness_of(process: psutil.Process, output_dir: Path) -> bool:
    """Whether PROCESS is a harness writing to OUTPUT_DIR (an absolute, resolved path)."""
    try:
        argv, cwd = process.cmdline(), process.cwd()
    except psutil.Error:
        return False
    given = _output_dir_argument(argv)
    return is_harness_command(argv) and given is not None and (Path(cwd) / given).resolve() == output_dir


def find_harness(output_dir: Path) -> tuple[psutil.Process | None, tuple[str, ...]]:
    """The running harness that writes to OUTPUT_DIR, and notes on how it was found.

    Its pid file first (the harness's own, removed when it exits). A harness killed outright leaves the
    file behind, and its pid may be another process's by now: that one is left alone. A harness still
    starting (its interpreter, its imports, the guide's parsing) has no pid file yet and is found by its
    command line: `--output-dir` naming OUTPUT_DIR from its working directory, so that another job's harness
    on the same host, with the same relative --output-dir in another workspace, is not taken for it.
    """
    output_dir = output_dir.resolve()
    pid_file = output_dir / PID_FILE
    notes = []
    try:
        pid = int(pid_file.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        pid = None
    if pid is not None:
        try:
            process = psutil.Process(pid)
        except psutil.Error:
            process = None
        if process is not None and _running(process) and is_harness_command(_cmdline(process)):
            return process, ()
        notes.append(f"the harness (pid {pid}) is no longer running")
    for process in psutil.process_iter():
        if process.pid != os.getpid() and _harness_of(process, output_dir) and _running(process):
            notes.append(
                f"found the harness (pid {process.pid}) by its command line: it had not written {PID_FILE} yet"
            )
            return process, tuple(notes)
    return None, tuple(notes)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def stop_harness(output_dir: Path, wait_s: float) -> StopResult:
    """Find the harness that writes to OUTPUT_DIR, send it SIGTERM and wait up to WAIT_S seconds for it to end."""
    process, notes = find_harness(output_dir)
    if process is None:
        reported = (output_dir / "results.json").is_file()
        return StopResult(Stopped.ALREADY_ENDED if reported else Stopped.NOTHING_RUNNING, None, notes)
    # it may have ended on its own meanwhile: its reports are looked for below all the same
    with contextlib.suppress(psutil.NoSuchProcess):
        process.send_signal(signal.SIGTERM)
    waited_until = time.monotonic() + wait_s
    while _running(process):
        if time.monotonic() >= waited_until:
            return StopResult(Stopped.STILL_RUNNING, process.pid, notes)
        time.sleep(_POLL_S)
    ended = Stopped.WITH_REPORTS if (output_dir / "results.json").is_file() else Stopped.WITHOUT_REPORTS
    return StopResult(ended, process.pid, notes)


if __name__ == "__main__":
    sys.exit(main())
