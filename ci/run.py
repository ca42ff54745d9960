"""Command line: `python -m ci.run GUIDE ...` runs labelled Markdown guides and reports every block."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ci.cli import command_parser

if TYPE_CHECKING:
    from ci.core.model import GuideOutcome, Plan
    from ci.runner.signals import StopSignals

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.run",
        description="Run the labelled blocks of Markdown guides in order, check their output, and report every block.",
        epilog=(
            "Exit status: 0 all blocks that ran passed; 1 a block failed, or --deadline was reached;"
            " 2 usage or document error; 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (reports written)."
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
        "--only",
        action="append",
        default=[],
        metavar="ID[,ID...]",
        help="run only these blocks (id, store name or ordinal)",
    )
    parser.add_argument("--from", dest="start", metavar="ID", help="start at this block")
    parser.add_argument("--until", metavar="ID", help="stop after this block")
    parser.add_argument("--list", action="store_true", help="print the plan and run nothing")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="format of --list")
    parser.add_argument(
        "--mask-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also mask this variable's value in every report (names with TOKEN, SECRET, PASSWORD or ending in _KEY are masked anyway)",
    )
    parser.add_argument("--keep-going", action="store_true", help="run the remaining blocks after a failure")
    parser.add_argument("--stream", action="store_true", help="also show block output live")
    parser.add_argument(
        "--update",
        action="store_true",
        help="rewrite the #test-result bodies that mismatched in --from-run DIR with what was printed; runs nothing",
    )
    parser.add_argument("--from-run", metavar="DIR", help="with --update: the --output-dir of a finished run")
    return parser


def _fail_usage(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"[ERROR] {message}", file=sys.stderr)
    return EXIT_USAGE


def _plan_entries(plans: Sequence[Plan]) -> list[dict[str, Any]]:
    entries = []
    for plan in plans:
        for step in plan.steps:
            entry: dict[str, Any] = {"guide": plan.guide, **step.identity()}
            if step.skip_reason is not None:
                entry["skip"] = step.skip_reason
            if step.expected is not None:
                entry["expected"] = step.expected.body
                entry["fuzzy"] = list(step.expected.fuzzy)
                entry["expected_line"] = step.expected.line
                entry["expected_loads"] = [[load.name, load.placeholder] for load in step.expected.loads]
            entries.append(entry)
    return entries


def _print_plan_text(plans: Sequence[Plan]) -> None:
    for plan in plans:
        print(f"{plan.guide}: {len(plan.steps)} blocks")
        for step in plan.steps:
            name = f"id={step.id}" if step.id else ""
            if step.store:
                name = f"{name} store={step.store}".strip()
            loads = " ".join(f"load={load.name}>>{load.placeholder}" for load in step.loads)
            extra = " hidden" if step.hidden else ""
            extra += f" skip={step.skip_reason!r}" if step.skip_reason is not None else ""
            print(
                f"{step.ordinal:>4}  {step.label.value:<12} {name or '-':<30} {step.language_word:<7} "
                f"{step.file}:{step.line}  timeout={step.timeout_s:g}s {loads}{extra}".rstrip()
            )


def _load_plans(
    args: argparse.Namespace, preset: dict[str, str], timeout_s: float | None
) -> tuple[list[Plan], list[Any], list[tuple[str | None, Any]]]:
    """The plans, every document error, and every warning with the local path of its guide (for annotations)."""
    from ci.core.model import DocumentError
    from ci.core.parse import parse_guide
    from ci.core.plan import build_plan
    from ci.core.source import read_guide

    plans = []
    problems = []
    warnings: list[tuple[str | None, Any]] = []
    for name in args.guides:
        local = None
        try:
            source = read_guide(name)
            local = os.path.abspath(source.local_path) if source.local_path else None
            parsed = parse_guide(source.text, name)
            plan = build_plan(parsed, preset_names=preset, default_timeout_s=timeout_s, source_path=local)
        except DocumentError as error:
            problems.extend(error.problems)
            warnings.extend((local, warning) for warning in error.warnings)
            continue
        plans.append(plan)
        warnings.extend((local, warning) for warning in plan.warnings)
    return plans, problems, warnings


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()  # --deadline counts from here: reading a guide from a URL is part of the run
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.update or args.from_run:
        if not (args.update and args.from_run):
            return _fail_usage(parser, "--update and --from-run DIR go together")
        from ci.maintain.update import update_guides

        return update_guides(args.guides, args.from_run)

    from ci.core.model import DocumentError
    from ci.core.plan import parse_duration, select_steps
    from ci.report.console import format_problems
    from ci.report.github import annotation, in_github_actions, problem_annotations

    preset: dict[str, str] = {}
    for item in args.preset:
        name, separator, value = item.partition("=")
        if not separator or not name:
            return _fail_usage(parser, f"--set {item!r}: write NAME=VALUE")
        preset[name] = value
    try:
        timeout_s = parse_duration(args.timeout) if args.timeout else None
        grace_s = parse_duration(args.grace) if args.grace not in ("0", "0s") else 0.0
        deadline = started + parse_duration(args.deadline) if args.deadline else None
    except ValueError as exc:
        return _fail_usage(parser, str(exc))
    workdir = os.path.abspath(args.workdir or os.getcwd())
    if not os.path.isdir(workdir):
        return _fail_usage(parser, f"--workdir {args.workdir!r} is not a directory")
    github = in_github_actions()

    plans, problems, warnings = _load_plans(args, preset, timeout_s)
    only = [ident.strip() for item in args.only for ident in item.split(",") if ident.strip()]
    left_out: list[dict[int, str]] = []
    if not problems and not args.list:
        try:
            left_out = select_steps(plans, only=only, start=args.start, until=args.until)
        except DocumentError as error:
            problems.extend(error.problems)
    for source_path, warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
        if github:
            print(annotation("warning", source_path, warning.line, "guide warning", warning.message))
    if problems:
        print(format_problems(problems), file=sys.stderr)
        count = len(problems)
        print(f"[ERROR] {count} document error{'s' if count > 1 else ''}; nothing was run", file=sys.stderr)
        if github:
            for text in problem_annotations(
                problems, {p.guide: p.source_path for p in plans} | {g: g for g in args.guides}
            ):
                print(text)
        return EXIT_USAGE
    if args.list:
        if args.format == "json":
            print(json.dumps(_plan_entries(plans), indent=2, ensure_ascii=False))
        else:
            _print_plan_text(plans)
        return EXIT_OK
    problem = _output_problem(args)
    if problem:
        return _fail_usage(parser, problem)
    return _run(args, plans, left_out, preset, workdir, grace_s, deadline, github)


def _run(
    args: argparse.Namespace,
    plans: list[Plan],
    left_out: list[dict[int, str]],
    preset: dict[str, str],
    workdir: str,
    grace_s: float,
    deadline: float | None,
    github: bool,
) -> int:
    from ci.runner.signals import StopSignals

    # absolute, because the run moves to --workdir before its first block
    if args.output_dir:
        output_dir = Path(args.output_dir).absolute()
    else:
        import tempfile

        output_dir = Path(tempfile.mkdtemp(prefix="guide-guard-"))
    output_dir.mkdir(parents=True, exist_ok=True)
    signals = StopSignals()
    signals.install()  # before the pid file tells anyone whom to signal
    pid_file = _write_pid_file(output_dir)
    # A console that has gone away (a closed terminal or ssh session: the SIGHUP case, a runner that
    # died) must not stop the run from ending its processes and writing its reports.
    console_streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ConsoleStream(sys.stdout), _ConsoleStream(sys.stderr)
    try:
        return _run_and_report(args, plans, left_out, preset, workdir, grace_s, deadline, github, output_dir, signals)
    finally:
        _remove_pid_file(pid_file)
        sys.stdout, sys.stderr = console_streams


def _run_and_report(
    args: argparse.Namespace,
    plans: list[Plan],
    left_out: list[dict[int, str]],
    preset: dict[str, str],
    workdir: str,
    grace_s: float,
    deadline: float | None,
    github: bool,
    output_dir: Path,
    signals: StopSignals,
) -> int:
    from ci.core.text import Masker, secret_values
    from ci.record import write_record
    from ci.report.console import ConsoleReporter
    from ci.report.github import annotation, escape_data, step_outputs, step_summary
    from ci.runner.execute import DEFAULT_ERROR_MARKERS, RUN_DEADLINE, RunOptions, not_run_outcome, run_guide
    from ci.runner.process import ProcessSupervisor

    junit_path = Path(args.junit).absolute() if args.junit else None
    env_seen: dict[str, str] = dict(os.environ)
    for plan in plans:
        env_seen.update(plan.settings.env)
    masker = Masker.of(secret_values(env_seen, args.mask_env))
    if github:
        for value in masker.secrets:  # registered first, so Actions masks them in every later line too
            print(f"::add-mask::{escape_data(value)}", flush=True)
    console = ConsoleReporter(sys.stdout, masker=masker, github=github, stream=args.stream)
    supervisor = ProcessSupervisor(os.urandom(16).hex(), grace_s=grace_s, signals=signals)
    # said once, before the first block, rather than found out at the first time-out
    dump_problem = supervisor.stack_dump_problem()
    if dump_problem is not None:
        print(f"warning: stack dumps on timeout will be missing: {dump_problem}", file=sys.stderr, flush=True)
        if github:
            title = "stack dumps on timeout will be missing"
            print(annotation("warning", None, 0, title, dump_problem, masker=masker), flush=True)
    outcomes: list[GuideOutcome] = []
    try:
        for index, plan in enumerate(plans):
            if signals.first is not None:
                outcomes.append(not_run_outcome(plan, f"run interrupted by signal {signals.first}"))
                continue
            if deadline is not None and time.monotonic() >= deadline:
                outcomes.append(not_run_outcome(plan, RUN_DEADLINE, deadline_reached=True))
                continue
            options = RunOptions(
                workdir=workdir,
                output_dir=output_dir,
                preset=preset,
                error_markers=(*DEFAULT_ERROR_MARKERS, *args.error_marker),
                keep_going=args.keep_going,
                guide_dir=f"{index + 1}-{Path(plan.guide).stem}" if len(plans) > 1 else "",  # keeps guides apart
                deadline=deadline,
            )
            console.guide_started(plan.guide, len(plan.steps))
            outcome = run_guide(
                plan, left_out=left_out[index], options=options, supervisor=supervisor, listener=console
            )
            console.guide_finished(outcome)
            outcomes.append(outcome)
    except Exception:
        # a bug in the harness: it may not leave what the run started running
        ended = supervisor.teardown(grace_s=min(grace_s, 1.5))
        print(
            f"[ERROR] guide-guard stopped on an internal error (a bug: please report it with the traceback below);"
            f" {len(ended)} process(es) the run had started were ended",
            file=sys.stderr,
            flush=True,
        )
        raise

    # -- the end of the run: passed, failed, deadline reached or interrupted, every path that ran comes here --
    if signals.hurried:
        print(
            "[ERROR] a second signal came: what the run had left was killed at once (SIGKILL)",
            file=sys.stderr,
            flush=True,
        )
    if any(o.deadline_reached for o in outcomes):
        left = sum(1 for o in outcomes for r in o.results if r.message == RUN_DEADLINE)
        print(f"[ERROR] the run deadline (--deadline {args.deadline}) was reached: {left} block(s) not run", flush=True)
    if signals.first is not None:
        exit_status = 128 + signals.first
    elif any(o.failed for o in outcomes):
        exit_status = EXIT_FAILED
    else:
        exit_status = EXIT_OK
    # a report that cannot be written (a full disk, say) is said, and the others are still written
    _write_report(
        "the run record",
        output_dir / "results.json",
        lambda path: write_record(path, outcomes, exit_status, masker=masker),
    )
    if junit_path is not None:
        from ci.report.junit import write_junit

        _write_report("the JUnit report", junit_path, lambda path: write_junit(path, outcomes, masker=masker))
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if github and summary_path:

        def append_summary(path: Path) -> None:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(step_summary(outcomes, masker=masker))

        _write_report("the step summary", Path(summary_path), append_summary)
    # the outcome for later jobs, which must not depend on the artifact upload reaching GitHub (docs/ci.md)
    outputs_path = os.environ.get("GITHUB_OUTPUT")
    if github and outputs_path:

        def append_outputs(path: Path) -> None:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(step_outputs(outcomes, exit_status, masker=masker))

        _write_report("the step outputs", Path(outputs_path), append_outputs)
    console.run_finished(outcomes, output_dir)
    return exit_status


PID_FILE = "harness.pid"  # in the output directory while the run lasts: whom to signal to stop it


def _write_pid_file(output_dir: Path) -> Path:
    """Write the harness's pid to OUTPUT_DIR/harness.pid, whole or not at all (a reader may look at any time)."""
    path = output_dir / PID_FILE
    partial = output_dir / f".{PID_FILE}.{os.getpid()}"
    partial.write_text(f"{os.getpid()}\n", encoding="ascii")
    os.replace(partial, path)
    return path


def _remove_pid_file(path: Path) -> None:
    """Remove the pid file, unless another run has written its own there since."""
    try:
        if path.read_text(encoding="ascii").strip() == str(os.getpid()):
            path.unlink()
    except OSError:
        pass


class _ConsoleStream:
    """A console stream that, once writing to it fails (its terminal or pipe is gone), discards what follows.

    The descriptor is pointed at /dev/null then, so that nothing buffered
    fails again later (at exit, Python would turn that into exit status 120).
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
            except OSError:
                self._lost()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except OSError:
                self._lost()

    def _lost(self) -> None:
        self.gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
        except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing to keep from failing
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _write_report(what: str, path: Path, write: Callable[[Path], None]) -> None:
    try:
        write(path)
    except OSError as exc:
        print(f"[ERROR] could not write {what} to {path}: {exc.strerror or exc}", file=sys.stderr, flush=True)


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
