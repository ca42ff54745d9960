"""One run of planned guides, start to end: stop signals, the pid file, every guide in turn, the reports."""

from __future__ import annotations

import argparse
import fcntl
import functools
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.base import frozen
from ci.base.files import os_error_text
from ci.base.signals import PID_FILE, remove_pid_file, signal_name, write_pid_file
from ci.base.text import escape_undecodable, installed, masked, plural, policy
from ci.cli import ConsoleGuard, ExitCode, fail, print_error
from ci.runner.actions_files import PrivateFiles

if TYPE_CHECKING:
    from ci.base.signals import StopSignals
    from ci.base.text import Masker
    from ci.guide.model import Plan
    from ci.process.supervisor import ProcessSupervisor
    from ci.record.outcome import GuideOutcome
    from ci.report.console import ConsoleReporter
    from ci.run.resume import Resume

__all__ = ["AfterRun", "RunSettings", "run"]


@frozen
class RunSettings:
    """What the command line asks of a run, checked before anything is read or run."""

    preset: dict[str, str]  # --set NAME=VALUE, as stored values
    timeout_s: float | None  # --timeout: the default block time limit, when given
    grace_s: float  # --grace: from SIGTERM to SIGKILL
    deadline: float | None  # --deadline as a time.monotonic() instant, when given
    workdir: str  # --workdir, absolute
    github: bool  # under GitHub Actions: annotations, masks, the step summary and outputs too
    heartbeat_s: float = 0.0  # --heartbeat: a running block is said to run after this long a silence; 0 never


# after the run's verdict, while the run still holds its output directory: (outcomes, exit status, output
# directory) -> the command's exit status (--update rewrites the guides from what the run wrote there)
AfterRun = Callable[[Sequence["GuideOutcome"], int, Path], int]


def run(
    args: argparse.Namespace,
    plans: list[Plan],
    left_out: list[dict[int, str]],
    settings: RunSettings,
    *,
    after: AfterRun | None = None,
    console_guard: ConsoleGuard | None = None,
    resume: Resume | None = None,
) -> int:
    """Run the planned guides as ARGS ask (blocks LEFT_OUT of each skipped) and write every report; the exit status,
    or AFTER's when given (it is called once every report is written and the verdict said). CONSOLE_GUARD, the
    command's console: from a stop signal on, its writes give way to the stop. RESUME (--resume, one guide): what
    the run takes over from the run it continues."""
    from ci.process.supervisor import ProcessSupervisor

    # absolute, because the run moves to --workdir before its first block
    junit_path = Path(args.junit).absolute() if args.junit else None
    output_dir = Path(args.output_dir).absolute() if args.output_dir else _temporary_output_dir()
    if isinstance(output_dir, str):
        return fail(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock_output_dir(output_dir)
    if isinstance(lock, str):
        return fail(lock)
    signals, handlers = _take_stop_signals(console_guard)  # before the pid file tells anyone whom to signal
    try:
        pid_file = write_pid_file(output_dir)
    except OSError as exc:
        _restore_stop_handlers(handlers)
        os.close(lock)
        return fail(
            f"cannot write the pid file {output_dir / PID_FILE}"
            f" ({os_error_text(exc, output_dir)}); nothing was run. A cancelled CI job finds the run by this file:"
            " clear its path (remove what is there, free the disk) or name another --output-dir"
        )
    # A console that has gone away (a closed terminal or ssh session: the SIGHUP case, a runner that
    # died) cannot stop the run from ending its processes and writing its reports: ci.run's main()
    # guards both streams (ci.cli.guarded_console).
    try:
        # the run's one masking policy: every writer masks by it until the run ends (its reports, --update's)
        with installed(_masker(args, plans, settings)):
            console = _console(args, settings)
            supervisor = ProcessSupervisor(
                os.urandom(16).hex(), grace_s=settings.grace_s, signals=signals, workdir=settings.workdir
            )
            _say_before_the_first_block(supervisor, settings.github, resume, plans)
            try:
                outcomes = _run_guides(args, plans, left_out, settings, output_dir, supervisor, console, resume)
            finally:  # a harness bug too: its files may hold what the blocks printed
                files_masked = _mask_files(output_dir, signals) if args.mask_files else None
            exit_status = _exit_status(outcomes, signals, args.deadline)
            _write_reports(outcomes, exit_status, output_dir, junit_path, settings.github, resume)
            console.run_finished(outcomes, output_dir)
            if files_masked:
                print(files_masked, flush=True)
            return exit_status if after is None else after(outcomes, exit_status, output_dir)
    finally:
        remove_pid_file(pid_file)
        os.close(lock)


def _say_private_files_written(blocks_wrote: Mapping[str, Path], github: bool) -> None:
    from ci.report.github import command_safe, private_files_note

    note = private_files_note(blocks_wrote, github)
    if note is not None:
        print(command_safe(note, github), file=sys.stderr, flush=True)


def _temporary_output_dir() -> Path | str:
    """A new directory under $TMPDIR/guide-guard/ for a run given no --output-dir (ci.run.outputs), or why none."""
    from ci.run.outputs import make_temporary_outputs

    try:
        made = make_temporary_outputs("run")
    except OSError as exc:
        where = exc.filename or "the temporary directory"
        return f"cannot make a temporary output directory ({os_error_text(exc, where)}); nothing was run: name one with --output-dir"
    for warning in made.warnings:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    return made.path


def _lock_output_dir(output_dir: Path) -> int | str:
    """Hold OUTPUT_DIR for this run (a lock on the directory itself, released when the harness ends, however
    it ends); the descriptor holding it, or why another run has it. Two runs in one directory would delete each
    other's block files and overwrite each other's results.json and pid file."""
    descriptor = os.open(output_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        try:
            holder = f" (pid {(output_dir / PID_FILE).read_text(encoding='ascii').strip()})"
        except OSError:
            holder = ""
        return f"--output-dir {output_dir} is in use by another run{holder}; nothing was run: name another directory"
    return descriptor


def _masker(args: argparse.Namespace, plans: Sequence[Plan], settings: RunSettings) -> Masker:
    """What every report masks: the secret values the blocks may print, `--set HF_TOKEN=...` too (registered
    with Actions first)."""
    from ci.report.github import escape_data
    from ci.report.listing import secrets_masker

    masker = secrets_masker(os.environ, plans, settings.preset, args.mask_env)
    if settings.github:
        for value in masker.values:  # registered first, so Actions masks them in every later line too
            print(f"::add-mask::{escape_data(value)}", flush=True)
    return masker


def _mask_files(output_dir: Path, signals: StopSignals) -> str | None:
    """--mask-files: the secrets masked in the files the run kept; the line that says so at the end (None: no file
    held one). Files it could not mask are said at once, in an [ERROR]."""
    from ci.runner.masking import mask_output_files, masking_lines, stopping_ends_by

    done = mask_output_files(output_dir, policy(), stopping_ends_by(lambda: signals.first_at))
    said, error = masking_lines(done, output_dir)
    if error is not None:
        print_error(error, sys.stdout)
    return said


def _console(args: argparse.Namespace, settings: RunSettings) -> ConsoleReporter:
    """The live console, on whatever sys.stdout is now (the stream that outlives a closed terminal)."""
    from ci.report.colour import colour_wanted
    from ci.report.console import ConsoleReporter

    return ConsoleReporter(
        sys.stdout,
        github=settings.github,
        stream=args.stream,
        verbose=args.verbose,
        heartbeat_s=settings.heartbeat_s,
        colour=colour_wanted(sys.stdout, os.environ, github=settings.github),
    )


def _say_before_the_first_block(
    supervisor: ProcessSupervisor, github: bool, resume: Resume | None, plans: Sequence[Plan]
) -> None:
    """Said once, before the first block: missing stack dumps, rather than found out at the first time-out; with
    --resume, what the run takes over from the run it continues (one guide): its notes (stderr), then the run it
    continues, what it keeps, what runs again and why, where it starts, masked."""
    from ci.report.github import annotation, command_safe

    if resume is not None:
        for note in resume.notes:
            print(command_safe(masked(f"warning: {note}"), github), file=sys.stderr, flush=True)
        print(command_safe(masked("\n".join(resume.log_lines(plans[0].steps))), github), flush=True)
    dump_problem = supervisor.stack_dump_problem()
    if dump_problem is not None:
        print(f"warning: stack dumps on timeout will be missing: {dump_problem}", file=sys.stderr, flush=True)
        if github:
            title = "stack dumps on timeout will be missing"
            print(annotation("warning", None, 0, title, dump_problem), flush=True)


def _run_guides(
    args: argparse.Namespace,
    plans: list[Plan],
    left_out: list[dict[int, str]],
    settings: RunSettings,
    output_dir: Path,
    supervisor: ProcessSupervisor,
    console: ConsoleReporter,
    resume: Resume | None = None,
) -> list[GuideOutcome]:
    """Run the guides one after another; a guide the run no longer gets to is not run. RESUME is the one guide's."""
    from ci.runner.execute import DEFAULT_ERROR_MARKERS, RUN_DEADLINE, RunOptions, not_run_outcome, run_guide

    signals, workdir, deadline = supervisor.signals, settings.workdir, settings.deadline
    private = PrivateFiles.of(output_dir, os.environ)  # what blocks see of the Actions runner's files
    private.make()
    outcomes: list[GuideOutcome] = []
    try:
        for index, plan in enumerate(plans):
            if signals.first is not None:
                outcomes.append(not_run_outcome(plan, f"run interrupted by {signal_name(signals.first)}"))
                continue
            if deadline is not None and time.monotonic() >= deadline:
                outcomes.append(not_run_outcome(plan, RUN_DEADLINE, deadline_reached=True))
                continue
            options = RunOptions(
                workdir=workdir,
                output_dir=output_dir,
                # --set wins over what the run resumed stored
                preset={**resume.stored, **settings.preset} if resume else settings.preset,
                error_markers=(*DEFAULT_ERROR_MARKERS, *args.error_marker),
                keep_going=args.keep_going,
                past_mismatch=bool(args.update),  # --update (without --from-run): mismatches are what it rewrites
                # keeps guides apart; named as results.json names its files (a byte not UTF-8 as \xNN)
                guide_dir=_guide_dir(index, plan.guide) if len(plans) > 1 else "",
                deadline=deadline,
                private_env=private.env(),
                kept=resume.kept if resume else {},
            )
            console.guide_started(plan.guide, len(plan.steps))
            outcome = run_guide(
                plan, left_out=left_out[index], options=options, supervisor=supervisor, listener=console
            )
            console.guide_finished(outcome)
            outcomes.append(outcome)
    except Exception:
        # a bug in the harness: it may not leave what the run started running
        from ci.record.outcome import STILL_RUNNING

        console.close()
        ended = supervisor.teardown(grace_s=min(settings.grace_s, 1.5))
        left = sum(1 for proc in ended if proc.ended_by == STILL_RUNNING)
        print_error(
            "guide-guard stopped on an internal error (a bug: please report it with the traceback below);"
            f" processes of the run ended: {len(ended) - left}"
            + (f", still running (could not be ended): {left}" if left else "")
        )
        raise
    return outcomes


_GUIDE_DIR_BYTES = 60  # of the guide's name in its files' names: a block's file name must stay under 255 bytes


def _guide_dir(index: int, guide: str) -> str:
    """`2-quick-start`: what keeps the files of the guide at INDEX apart from the others' (its number makes it unique).

    Its name is cut to _GUIDE_DIR_BYTES on a character boundary: a guide
    named with the longest name a file system allows still has room for its
    blocks' names after it.
    """
    name = escape_undecodable(Path(guide).stem).encode("utf-8", "surrogatepass")[:_GUIDE_DIR_BYTES]
    return f"{index + 1}-{name.decode('utf-8', 'ignore')}"


def _exit_status(outcomes: Sequence[GuideOutcome], signals: StopSignals, deadline: str | None) -> int:
    """The run's exit status; said first: a second signal, and the blocks --deadline left out."""
    from ci.runner.execute import RUN_DEADLINE

    if signals.hurried:
        print_error("a second signal came: what the run had left was killed at once (SIGKILL)")
    if any(o.deadline_reached for o in outcomes):
        left = sum(1 for o in outcomes for r in o.results if r.message == RUN_DEADLINE)
        print_error(
            f"the run deadline (--deadline {deadline}) was reached: {plural(left, 'block')} not run", sys.stdout
        )
    if signals.first is not None:
        return ExitCode.interrupted(signals.first)
    if any(o.failed for o in outcomes):
        return ExitCode.FAILED
    return ExitCode.OK


def _write_reports(
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    output_dir: Path,
    junit_path: Path | None,
    github: bool,
    resume: Resume | None = None,
) -> None:
    """results.json (naming the run it resumed, if any), --junit, and under Actions the step summary and outputs;
    one that fails is said, not fatal. What blocks wrote to their copies of the runner's files is said too."""
    from ci.record import write_record
    from ci.report.github import runner_file_writes

    # a report that cannot be written (a full disk, say) is said, and the others are still written
    _write_report(
        "the run record",
        output_dir / "results.json",
        lambda path: write_record(path, outcomes, exit_status, resumed_from=resume.earlier if resume else None),
    )
    if junit_path is not None:
        from ci.report.junit import write_junit

        _write_report("the JUnit report", junit_path, lambda path: write_junit(path, outcomes))
    blocks_wrote = PrivateFiles.of(output_dir, os.environ).written()  # the copies _run_guides made
    _say_private_files_written(blocks_wrote, github)
    if not github:
        return
    for write in runner_file_writes(outcomes, exit_status, environ=os.environ, blocks_wrote=blocks_wrote):
        _write_report(write.what, write.path, functools.partial(_append, text=write.text), replaces=write.replaces)


def _append(path: Path, text: str) -> None:
    """TEXT at the end of PATH, on a line of its own: what was there before cannot run into it."""
    with open(path, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
        handle.write(text.encode("utf-8"))


def _take_stop_signals(console_guard: ConsoleGuard | None) -> tuple[StopSignals, dict[int, Any]]:
    """The run's stop signals, installed, and the handlers they replaced; the console gives way to them."""
    from ci.base.signals import StopSignals

    handlers = _stop_handlers()
    signals = StopSignals()
    signals.install()
    if console_guard is not None:
        console_guard.give_way_on_stop(signals.wake_fd)
    return signals, handlers


def _stop_handlers() -> dict[int, Any]:
    """The handlers of the signals that stop a run, as they are before the run installs its own."""
    from ci.base.signals import STOP_SIGNALS, SUSPEND_SIGNALS

    return {signum: signal.getsignal(signum) for signum in (*STOP_SIGNALS, *SUSPEND_SIGNALS)}


def _restore_stop_handlers(handlers: dict[int, Any]) -> None:
    signal.set_wakeup_fd(-1)
    for signum, handler in handlers.items():
        # None: a handler set outside Python, which cannot be put back; the default is the nearest
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _write_report(what: str, path: Path, write: Callable[[Path], None], *, replaces: bool = True) -> None:
    """WRITE the report at PATH; one that cannot be written is said, and when it REPLACES a file (results.json,
    JUnit: not the appended step summary) an earlier run's file there is removed, so that it cannot pass for this one."""
    try:
        write(path)
    except OSError as exc:
        print_error(f"could not write {what} to {path}: {os_error_text(exc, path)}")
        if not replaces:
            return
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as unlink_error:
            print_error(
                f"{what} left at {path} by an earlier run could not be removed ({unlink_error.strerror}): it is not this run's"
            )
            return
        print_error(f"{what} left at {path} by an earlier run was removed: it is not this run's")
