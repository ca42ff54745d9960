"""`ci.run GUIDE --resume DIR`: its options, how they combine with the rest, and the run's selection with the resume
(what the run takes over is ci.record.resume's)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.record.resume import RESUME_CHANGED, ResumeRefused

if TYPE_CHECKING:
    from ci.core.model import Plan, Problem, Step
    from ci.record import LastRun, RecordedGuide
    from ci.record.resume import Resume

__all__ = [
    "RESUME_EXIT_STATUS",
    "add_resume_options",
    "resume_run",
    "resume_usage_problem",
    "select_and_resume",
    "take_resume",
]

RESUME_EXIT_STATUS = (
    "With --resume DIR: as a run, and 2 when DIR holds no finished run of the guide, or every block passed there,"
    " or the guide changed before the block the resume starts at (without --resume-changed); nothing is run then."
)


def add_resume_options(parser: argparse.ArgumentParser) -> None:
    """--resume and --resume-changed."""
    parser.add_argument(
        "--resume",
        metavar="DIR",
        help=(
            "continue the run kept in DIR (its --output-dir, a CI artifact): keep the blocks that passed there"
            " (reported skipped) and the values they stored, run again those that started a process still running"
            " at its end or marked rerun_on_resume, and start at the first block that did not pass (or --from);"
            " the run writes to its own --output-dir"
        ),
    )
    parser.add_argument(
        RESUME_CHANGED,
        action="store_true",
        help="with --resume: keep what passed in DIR's run even where the guide changed since (else exit 2, named)",
    )


def resume_usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with how the command line combines --resume with the rest, before anything is read or run."""
    if args.resume_changed and not args.resume:
        return f"{RESUME_CHANGED} goes with --resume DIR: add --resume DIR, or drop {RESUME_CHANGED}"
    if not args.resume:
        return None
    if len(args.guides) != 1:
        return "--resume DIR continues the run of one guide: give that guide alone"
    for flag, given in (("--only", args.only), ("--list", args.list), ("--update", args.update)):
        if given:
            return f"--resume runs from the first block that did not pass in DIR's run, and {flag} does not go with it: give one of them"
    return None


def select_and_resume(
    args: argparse.Namespace, plans: Sequence[Plan], preset: dict[str, str], problems: list[Problem]
) -> tuple[list[dict[int, str]], Resume | None] | None:
    """The blocks each plan leaves out (its document errors added to PROBLEMS), with --resume what the run takes over
    from the run it continues (its blocks that run again or are kept not left out); None when the resume is refused
    (said)."""
    from ci.cli import print_error
    from ci.core.model import DocumentError
    from ci.core.selection import only_idents, select_steps

    try:
        resume = resume_run(args, plans)
    except ResumeRefused as refusal:
        print_error("\n".join(refusal.problems))
        return None
    preset_names = {*preset, *(resume.stored if resume else ())}
    only = only_idents(args.only, plans)
    left_out: list[dict[int, str]] = []
    try:
        left_out = select_steps(plans, only=only, start=args.start, until=args.until, preset_names=preset_names)
    except DocumentError as error:
        problems.extend(error.problems)
    if resume is not None and left_out:
        resume = resume.apply(left_out[0])
    return left_out, resume


def resume_run(args: argparse.Namespace, plans: Sequence[Plan]) -> Resume | None:
    """--resume: what the run of the one guide takes over; None without --resume. ResumeRefused says why it cannot
    be resumed. An unknown --from is left for the selection to say."""
    if not args.resume:
        return None
    plan = plans[0]
    start = next((s for s in plan.steps if args.start in (s.id, s.store, str(s.ordinal))), None) if args.start else None
    return take_resume(plan, args.resume, output_dir=args.output_dir, start=start, changed_ok=args.resume_changed)


def take_resume(plan: Plan, run_dir: str, *, output_dir: str | None, start: Step | None, changed_ok: bool) -> Resume:
    """What resuming PLAN from the run kept in RUN_DIR takes over; ResumeRefused says why it cannot.

    OUTPUT_DIR is the resumed run's own (None: a new temporary one), never
    RUN_DIR: the earlier run's record stays as it was. START is --from's
    block, when given.
    """
    from ci.record.read import RecordError, read_run
    from ci.record.resume import plan_resume, run_directory
    from ci.run_update import hold_finished_run

    directory = run_directory(Path(run_dir).absolute())
    if not directory.is_dir():
        raise ResumeRefused([f"--resume {run_dir}: no such directory; pass the --output-dir of an earlier run"])
    if output_dir is not None and _same_directory(directory, Path(output_dir)):
        raise ResumeRefused(
            [
                f"--resume {run_dir} and --output-dir {output_dir} are the same directory: the resumed run"
                " writes a record of its own and leaves the earlier one as it was; name another --output-dir"
            ]
        )
    held = hold_finished_run(directory, verb="resume")
    if isinstance(held, str):
        raise ResumeRefused([f"--resume: {held}; nothing was run"])
    try:
        try:
            last = read_run(directory)
        except RecordError as exc:
            raise ResumeRefused([f"--resume: {exc}"]) from None
        recorded = _recorded_guide(plan, last, str(directory))
        return plan_resume(plan, recorded, directory, start=start, changed_ok=changed_ok)
    finally:
        if held is not None:
            os.close(held)


def _same_directory(one: Path, other: Path) -> bool:
    try:
        return other.exists() and os.path.samefile(one, other)
    except OSError:
        return False


def _recorded_guide(plan: Plan, last: LastRun, run_dir: str) -> RecordedGuide:
    recorded = last.guide_for(plan.guide)
    if recorded is None:
        ran = ", ".join(g.guide for g in last.guides) or "no guide"
        raise ResumeRefused([f"--resume {run_dir}: that run ran {ran}, not {plan.guide}; resume a run of this guide"])
    return recorded
