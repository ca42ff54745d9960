"""Command line: `python -m ci.run GUIDE ...` runs labelled Markdown guides and reports every block."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.base.text import plural
from ci.cli import (
    ConsoleGuard,
    ExitCode,
    add_dialect_options,
    command_parser,
    dialect_problem,
    fail,
    print_error,
    run_guarded,
)
from ci.github.secrets import add_secret_options, missing_secrets, take_secret_names
from ci.run.outputs import report_path_problem
from ci.run.resume import RESUME_EXIT_STATUS, add_resume_options, resume_usage_problem
from ci.run.update import UPDATE_EXIT_STATUS, UpdateAfterRun, add_update_options, update_from_run, update_usage_problem

if TYPE_CHECKING:
    from ci.guide.model import Plan, Problem
    from ci.run.session import RunSettings

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """ci.run's command line: the guides, where the run happens and keeps its reports, and its limits."""
    parser = command_parser(
        "ci.run",
        description="Run the labelled blocks of Markdown guides in order, check their output, and report every block.",
        epilog=(
            "Exit status: 0 all blocks that ran passed; 1 a block failed, or --deadline was reached;"
            " 2 usage or document error; 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP, 128+N by another"
            " signal N that would kill it (reports written). " + UPDATE_EXIT_STATUS + " " + RESUME_EXIT_STATUS
        ),
    )
    parser.add_argument("guides", nargs="+", metavar="GUIDE", help="a guide: a path or an http(s) URL")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="keep block outputs, stack dumps and results.json here (default: a new temporary directory)",
    )
    parser.add_argument("--workdir", metavar="DIR", help="run blocks in this directory (default: the current one)")
    parser.add_argument(
        "--set",
        dest="preset",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="store NAME before the first block, as a setup would",
    )
    parser.add_argument(
        "--set-lines",
        dest="preset_lines",
        action="append",
        default=[],
        metavar="TEXT",
        help=(
            "a --set for each NAME=VALUE line of TEXT, empty lines skipped (a workflow input of one value a line);"
            " a --set of the same NAME wins"
        ),
    )
    parser.add_argument(
        "--timeout", metavar="T", help="default block time limit: seconds or 30s, 10m, 3h (default 10800 s)"
    )
    parser.add_argument(
        "--grace", metavar="T", default="10", help="after SIGTERM, wait this long before SIGKILL (default 10 s)"
    )
    parser.add_argument(
        "--deadline",
        metavar="T",
        help="whole-run limit, as --timeout: the running block is stopped as on a timeout, the rest is not run",
    )
    parser.add_argument(
        "--error-marker", action="append", default=[], metavar="TEXT", help="another text that marks an error in stderr"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="make every warning about a guide (a forgotten load, an orphan result...) a document error: exit 2, nothing run",
    )
    add_dialect_options(parser)
    add_secret_options(parser)
    _add_choice_options(parser)
    add_update_options(parser)
    add_resume_options(parser)
    return parser


def _add_choice_options(parser: argparse.ArgumentParser) -> None:
    """Which blocks run and how: --only/--from/--until, --list, masking, --keep-going, the log's detail."""
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ID[,ID...]",
        help="run only these blocks (id, store name or ordinal); repeatable; a value that is a block's whole id is not split at commas",
    )
    parser.add_argument("--from", dest="start", metavar="ID", help="start at this block")
    parser.add_argument("--until", metavar="ID", help="stop after this block")
    parser.add_argument("--list", action="store_true", help="print the plan and run nothing")
    parser.add_argument("--format", choices=("text", "json"), help="with --list: the plan as text (default) or JSON")
    parser.add_argument("--commands", action="store_true", help="with --list: each command as it will run (masked)")
    parser.add_argument(
        "--mask-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also mask this variable's value in every report (names ending in _TOKEN, _SECRET or _KEY, or holding PASSWORD, are masked anyway)",
    )
    parser.add_argument(
        "--mask-files",
        action="store_true",
        help=(
            "at the end of the run, also mask the secret values in the files kept under the output directory"
            " (block outputs, dumps, collected files), e.g. before uploading it as a CI artifact"
        ),
    )
    parser.add_argument("--keep-going", action="store_true", help="run the remaining blocks after a failure")
    parser.add_argument(
        "--stream",
        action="store_true",
        help="also show block output live, its lines marked '| ' (stdout) and '! ' (stderr)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show every block's sections (expected, actual, stored values...); by default a passing block is one line",
    )
    parser.add_argument(
        "--heartbeat",
        metavar="T",
        default="5m",
        help=(
            "after this long without a line about a running block, say it still runs"
            " (default 5m; at least 1s; 0 turns it off)"
        ),
    )


def _load_plans(
    args: argparse.Namespace, preset: dict[str, str], timeout_s: float | None
) -> tuple[list[Plan], list[Any], list[tuple[str | None, Any]]]:
    """The plans, every document error, and every warning with the local path of its guide (for annotations)."""
    from ci.guide.dialects import plan_guide
    from ci.guide.dialects.fences import upstream_ref, upstream_variable
    from ci.guide.model import DocumentError
    from ci.guide.source import read_guide

    plans = []
    problems = []
    warnings: list[tuple[str | None, Any]] = []
    for name in args.guides:
        local = None
        try:
            source = read_guide(name)
            local = os.path.abspath(source.local_path) if source.local_path else None
            plan = plan_guide(
                source.text,
                source.name,
                dialect=args.dialect,
                preset_names=preset,
                default_timeout_s=timeout_s,
                timeout_rules=args.timeout_rules,
                source_path=local,
                upstream_ref=upstream_ref(os.environ),
                upstream_variable=upstream_variable(os.environ),
            )
        except DocumentError as error:
            problems.extend(error.problems)
            warnings.extend((local, warning) for warning in error.warnings)
            continue
        plans.append(plan)
        warnings.extend((local, warning) for warning in plan.warnings)
    return plans, problems, warnings


def _preset(args: argparse.Namespace) -> dict[str, str] | str:
    """The values of --set and --set-lines by name, or what is wrong with one."""
    preset: dict[str, str] = {}
    lines = [("--set-lines", line) for text in args.preset_lines for line in text.split("\n") if line]
    for option, item in [*lines, *(("--set", item) for item in args.preset)]:  # --set wins over a line
        name, separator, value = item.partition("=")
        if not separator or not name:
            return f"{option} {item!r}: write NAME=VALUE" + (", one a line" if option == "--set-lines" else "")
        preset[name] = value
    return preset


def _settings(args: argparse.Namespace, started: float) -> RunSettings | str:
    """The checked settings, or what is wrong with them."""
    from ci.report.github import in_github_actions
    from ci.report.live import MIN_HEARTBEAT_S
    from ci.run.session import RunSettings

    preset = _preset(args)
    if isinstance(preset, str):
        return preset
    try:
        timeout_s = _duration("--timeout", args.timeout) if args.timeout else None
        grace_s = _duration("--grace", args.grace) if args.grace not in ("0", "0s") else 0.0
        deadline = started + _duration("--deadline", args.deadline) if args.deadline else None
        heartbeat_s = 0.0 if _is_zero(args.heartbeat) else _duration("--heartbeat", args.heartbeat)
    except ValueError as exc:
        return str(exc)
    if 0 < heartbeat_s < MIN_HEARTBEAT_S:  # one line per silent T: a tiny T would flood the log
        return f"--heartbeat {args.heartbeat}: at least {MIN_HEARTBEAT_S:g}s between heartbeats (or 0 to turn them off)"
    workdir = os.path.abspath(args.workdir or os.getcwd())
    if not os.path.isdir(workdir):
        return f"--workdir {args.workdir!r} is not a directory"
    return RunSettings(preset, timeout_s, grace_s, deadline, workdir, in_github_actions(), heartbeat_s)


def _is_zero(text: str) -> bool:
    """`0`, `0s`, `0.0m`: a duration that turns its option off."""
    return re.fullmatch(r"0*\.?0*\s*[smh]?", text.strip()) is not None and any(c == "0" for c in text)


def _duration(option: str, text: str) -> float:
    """Seconds of a duration option; ValueError naming the option."""
    from ci.guide.plan import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """The command: its exit status, whatever became of its console (a closed pipe, a full disk, nobody reading),
    one line and 128 + N for a signal that stops it before its run begins (Ctrl-C while a guide is fetched)."""
    started = time.monotonic()  # --deadline counts from here: reading a guide from a URL is part of the run
    return run_guarded(lambda console: _main(argv, started, console))


def _combination_problem(args: argparse.Namespace) -> str | None:
    """Flags that do not go together, or a value none can take, said before anything is read or run."""
    dialect = dialect_problem(args.dialect)
    if dialect is not None:
        return dialect
    if args.format is not None and not args.list:
        # without --list the whole guide would run, and print no plan: an hour of machine time for nothing
        return (
            f"--format {args.format} goes with --list, which prints the plan and runs nothing:"
            f" add --list (--list --format {args.format}), or drop --format to run the guide"
        )
    if args.commands and not args.list:  # as for --format: a whole run, when only a look was asked for
        return "--commands goes with --list, which prints the plan and runs nothing: add --list (--list --commands)"
    return update_usage_problem(args) or resume_usage_problem(args)


def _main(argv: Sequence[str] | None, started: float, console: ConsoleGuard) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console.closed_pipe_is_normal = args.list  # `--list | head -1` ends quietly
    usage = _combination_problem(args) or take_secret_names(args)
    if usage:
        return fail(usage, parser)
    if args.from_run:
        preset = _preset(args)
        if isinstance(preset, str):
            return fail(preset, parser)
        return update_from_run(args.guides, args.from_run, args.mask_env, args.dialect, preset)
    settings = _settings(args, started)
    if isinstance(settings, str):
        return fail(settings, parser)
    if missing_secrets(args.secret, args.strict, settings.github):
        return ExitCode.USAGE
    update = UpdateAfterRun.take(args) if args.update else None  # the guides as they are before the run reads them
    if isinstance(update, list):
        parser.print_usage(sys.stderr)
        for refusal in update:
            print_error(refusal)
        print_error("--update: nothing was run or updated")
        return ExitCode.USAGE

    from ci.guide.plan import guides_without_blocks
    from ci.run.resume import select_and_resume

    plans, problems, warnings = _load_plans(args, settings.preset, settings.timeout_s)
    problems.extend(guides_without_blocks(plans))
    left_out: list[dict[int, str]] = [{} for _ in plans]
    resume = None
    if not problems:  # --list too: it shows what the selection runs, and a selection of nothing is an error there too
        selected = select_and_resume(args, plans, settings.preset, problems)
        if selected is None:  # a resume refused
            _print_warnings(warnings, settings.github)
            return ExitCode.USAGE
        left_out, resume = selected
    if _report_plan_problems(args, plans, problems, warnings, settings.github):
        return ExitCode.USAGE
    if args.list:
        from ci.report.listing import PlanListing, print_plan

        listing = PlanListing.of_command_line(args, plans, left_out, settings.preset, os.environ)
        print_plan(plans, listing, as_json=args.format == "json", github=settings.github)
        return ExitCode.OK
    problem = _output_problem(args) or report_path_problem(
        [name for name in args.guides if not name.startswith(("http://", "https://"))],
        args.output_dir,
        args.junit,
        settings.workdir,
    )
    if problem:
        return fail(problem, parser)
    from ci.run.session import run

    if update is not None:
        update.left_out = left_out
    try:
        return run(args, plans, left_out, settings, after=update, console_guard=console, resume=resume)
    finally:
        if resume is not None and resume.hold is not None:
            os.close(resume.hold)  # the run it resumed may be pruned now, as any finished run


# The annotations of warnings and document errors go to stderr, beside the lines they repeat: stdout is the
# plan of --list (JSON with --format json), which must stay readable under Actions too, and the runner reads
# workflow commands on both streams. On one stream, an annotation also always comes after the stop-commands
# that wrap the quoted guide text before it, never inside it.
def _report_plan_problems(
    args: argparse.Namespace,
    plans: Sequence[Plan],
    problems: list[Problem],
    warnings: Sequence[tuple[str | None, Problem]],
    github: bool,
) -> bool:
    """Print the warnings, then the document errors; whether there were errors (with --strict, warnings are)."""
    if args.strict:  # every warning is an error, printed as one after the errors proper
        problems = [*problems, *(warning for _, warning in warnings)]
        warnings = []
    _print_warnings(warnings, github)
    if not problems:
        return False
    _print_document_errors(problems, {p.guide: p.source_path for p in plans} | {g: g for g in args.guides}, github)
    if args.strict:
        print_error("--strict: the guides' warnings count as document errors")
    return True


def _print_warnings(warnings: Sequence[tuple[str | None, Any]], github: bool) -> None:
    from ci.report.github import annotation, command_safe

    for source_path, warning in warnings:
        print(command_safe(f"warning: {warning}", github), file=sys.stderr)
        if github:
            print(annotation("warning", source_path, warning.line, "guide warning", warning.message), file=sys.stderr)


def _print_document_errors(problems: Sequence[Problem], source_paths: dict[str, str | None], github: bool) -> None:
    from ci.report.console import format_problems
    from ci.report.github import command_safe, problem_annotations

    print(command_safe(format_problems(problems), github), file=sys.stderr)
    count = len(problems)
    print_error(f"{plural(count, 'document error')}; nothing was run")
    if github:
        for text in problem_annotations(problems, source_paths):
            print(text, file=sys.stderr)


def _output_problem(args: argparse.Namespace) -> str | None:
    """Why the run could not keep its outputs where the command line says, before any block runs."""
    wanted = [("--output-dir", Path(args.output_dir), Path(args.output_dir))] if args.output_dir else []
    if args.junit:
        junit = Path(args.junit)
        if junit.is_dir():
            return f"--junit {args.junit!r} is a directory; name a file, e.g. {junit / 'junit.xml'}"
        wanted.append(("--junit", junit, junit.parent))
    for option, named, directory in wanted:
        if directory.exists() and not directory.is_dir():
            return f"{option} {str(named)!r}: {str(directory)!r} is a file, not a directory; name another place"
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return f"{option} {str(named)!r}: cannot create {str(directory)!r} ({exc.strerror or exc}); name a writable place"
        if not os.access(directory, os.W_OK | os.X_OK):
            return f"{option} {str(named)!r}: {str(directory)!r} is not writable; name a writable place"
    return None


if __name__ == "__main__":
    sys.exit(main())
