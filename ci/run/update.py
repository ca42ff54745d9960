"""`ci.run --update`: rewrite the mismatched `#test-result` bodies of guides, from a run made now or one made elsewhere.

`GUIDE --update` runs the guides as a plain run does, then updates each from
what that run wrote; `GUIDE --update --from-run DIR` updates from the finished
run kept in DIR (a CI artifact) and runs nothing. Both rewrite through
ci.maintain.update.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base.signals import signal_name
from ci.base.text import error_line, plural
from ci.cli import ExitCode, fail, print_error

if TYPE_CHECKING:
    from ci.maintain.update import GuideSnapshot, GuideUpdate
    from ci.record import LastRun
    from ci.record.outcome import GuideOutcome

__all__ = [
    "UPDATE_EXIT_STATUS",
    "UpdateAfterRun",
    "add_update_options",
    "hold_finished_run",
    "update_from_run",
    "update_usage_problem",
]

UPDATE_EXIT_STATUS = (
    "With --update (the run, then the update): 0 every block that ran passed or mismatched and every mismatch was"
    " updated; 1 a block failed in a way an update cannot fix (failed, timed out, error), a mismatch was left alone"
    " (said why), blocks were not run after a failure, or a guide changed on disk during the run; 2 usage error (a"
    " guide given by URL, --list); an interrupted run updates nothing and exits 130/143/129."
    " With --update --from-run DIR: 0 every mismatch updated (or none), 1 some left alone, 2 bad input."
)


def add_update_options(parser: argparse.ArgumentParser) -> None:
    """--update and --from-run."""
    parser.add_argument(
        "--update",
        action="store_true",
        help=(
            "run the guides as usual, then rewrite the #test-result bodies that mismatched with what was printed"
            " (in a plain-fence guide, the ```text fences whose search failed; local guides only, each one named;"
            " the diff on stdout); an interrupted run, or a guide edited during the run, is not updated"
        ),
    )
    parser.add_argument(
        "--from-run",
        metavar="DIR",
        help="with --update: update from the finished run kept in DIR (its --output-dir, a CI artifact); runs nothing",
    )


def update_usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with how the command line combines --update with the rest, before anything is read or run."""
    if args.from_run and not args.update:
        return "--from-run DIR goes with --update: add --update to update the guides from that run"
    if args.update and args.list:
        return "--update runs the guides (or reads --from-run DIR) and --list runs nothing: give one of them"
    return None


def update_from_run(
    guides: Sequence[str],
    run_dir: str,
    mask_env: Sequence[str],
    dialect: str = "labels",
    preset: Mapping[str, str] | None = None,
) -> int:
    """--update --from-run DIR: 0 every mismatch updated (or none), 1 some left alone (said why), 2 bad input.

    The guides are read in DIALECT (--dialect), as the run read them: results.json does not say how. PRESET (the
    --set values) is masked as the run masked it: a secret among them stays out of the guides.
    """
    from ci.record import RecordError, read_run

    held = hold_finished_run(Path(run_dir))
    if isinstance(held, str):
        return fail(f"--from-run: {held}; nothing was updated")
    try:
        try:
            run = read_run(run_dir)
        except RecordError as exc:
            return fail(f"--from-run: {exc}")
        updates = (_update_one(name, run, mask_env, None, dialect, preset or {})[0] for name in guides)
        return max(updates, default=ExitCode.OK)
    finally:
        if held is not None:
            os.close(held)


def hold_finished_run(run_dir: Path, *, verb: str = "update") -> int | str | None:
    """A shared hold on RUN_DIR, so that no run starts writing there while the guides are updated from it (the
    descriptor; None when RUN_DIR is no directory, which reading it says); or why its files are not a finished run's,
    saying when to VERB from it.

    A run holds its output directory (ci.run.session) until its reports are written
    and its pid file is removed: one still holding it is not done writing; a pid
    file with no run holding the directory is left by a run killed before its
    end, whose block outputs are not those results.json describes.
    """
    import fcntl

    from ci.base.signals import PID_FILE

    try:
        descriptor = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    pid_file = run_dir / PID_FILE
    try:
        pid = pid_file.read_text(encoding="ascii").strip()
    except OSError:
        pid = None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        who = f" (pid {pid})" if pid else ""
        return f"a run{who} is still writing {run_dir}, so its results are not final: {verb} once it has ended"
    if pid is not None and pid_file.exists():
        os.close(descriptor)
        return (
            f"{pid_file} is left by a run (pid {pid}) that was killed before it finished: the outputs in {run_dir}"
            " may be that run's, results.json an earlier one's. Run the guide again (or, if you know they belong"
            f" together, remove {pid_file})"
        )
    return descriptor


def _update_one(
    name: str,
    run: LastRun,
    mask_env: Sequence[str],
    snapshot: GuideSnapshot | None,
    dialect: str,
    preset: Mapping[str, str] | None = None,
) -> tuple[ExitCode, int]:
    """Update one guide and say what became of it: its status, and how many #test-result bodies were rewritten.

    A guide that cannot be updated at all is USAGE without SNAPSHOT (bad
    input), FAILED with it (the run made now went well, the update could not follow).
    """
    from ci.maintain.update import GuideNotUpdatable, update_guide

    try:
        update = update_guide(name, run, mask_env=mask_env, snapshot=snapshot, dialect=dialect, preset=preset or {})
    except GuideNotUpdatable as refusal:
        for problem in refusal.problems:
            print_error(problem)
        return (ExitCode.USAGE if snapshot is None else ExitCode.FAILED), 0
    return _print_update(update), (update.updated if update.not_written is None else 0)


def _print_update(update: GuideUpdate) -> ExitCode:
    """The diff of what was written on stdout; notes and what became of the guide on stderr."""
    for note in update.notes:
        print(f"warning: {note}", file=sys.stderr)
    if update.not_written is not None:
        print_error(f"{update.guide}: the rewritten guide was not written because {update.not_written}")
        return ExitCode.FAILED
    if not update.diff:
        print(f"{update.guide}: nothing to update", file=sys.stderr)
    else:
        from ci.report.github import command_safe, in_github_actions

        diff, github = "".join(update.diff), in_github_actions()
        sys.stdout.write(command_safe(diff.rstrip("\n"), github) + "\n" if github else diff)
        sys.stdout.flush()
        if update.statements:  # a console session: the statements whose output lines were rewritten
            count, lines = len(update.statements), ", ".join(map(str, update.statements))
            what = f"the output of {plural(count, 'statement')} (line{'s' if count > 1 else ''} {lines})"
        else:
            what = plural(update.updated, update.unit)
        print(f"{update.guide}: updated {what}", file=sys.stderr)
    return ExitCode.OK if update.complete else ExitCode.FAILED


class UpdateAfterRun:
    """`GUIDE --update` without --from-run: each guide as it was before the run, updated from the run once it ends.

    Built before the guides are planned (`take` says why one cannot be
    updated, before anything is run); called by ci.run.session.run once the run
    has written its reports and said its verdict.
    """

    def __init__(self, snapshots: Sequence[GuideSnapshot], args: argparse.Namespace) -> None:
        self.snapshots = tuple(snapshots)
        self.mask_env = tuple(args.mask_env)
        self.keep_going = bool(args.keep_going)
        self.dialect = str(args.dialect)  # how the run read the guides, as the update reads them
        self.left_out: list[dict[int, str]] = []  # per guide, the blocks the selection left out (set before the run)

    @staticmethod
    def take(args: argparse.Namespace) -> UpdateAfterRun | list[str]:
        """The guides as they are now, or why they cannot be updated: a URL, a file not read, one named twice."""
        from ci.maintain.update import GuideNotUpdatable, snapshot_guide

        snapshots: list[GuideSnapshot] = []
        problems: list[str] = []
        for name in args.guides:
            try:
                snapshots.append(snapshot_guide(name))
            except GuideNotUpdatable as refusal:
                problems.extend(refusal.problems)
        seen: dict[str, str] = {}
        for snapshot in snapshots:
            real = os.path.realpath(snapshot.path)
            if real in seen:
                problems.append(f"{snapshot.name}: the same guide as {seen[real]}; name each guide to update once")
            seen.setdefault(real, snapshot.name)
        return problems or UpdateAfterRun(snapshots, args)

    def __call__(self, outcomes: Sequence[GuideOutcome], exit_status: int, output_dir: Path) -> int:
        """Update every guide from the run that just wrote OUTPUT_DIR; the command's exit status."""
        from ci.record import RecordError, read_run

        sys.stdout.flush()  # the run's verdict comes first
        if exit_status > 128:  # ExitCode.interrupted: the run was stopped by a signal
            print_error(
                f"the run was interrupted ({signal_name(exit_status - 128)}): no guide was updated, since what it"
                " saw is incomplete. Run the update again"
            )
            return exit_status
        try:
            run = read_run(output_dir)
        except RecordError as exc:
            print_error(f"the run's record cannot be read back, so no guide was updated: {exc}")
            return ExitCode.FAILED
        updates = [_update_one(s.name, run, self.mask_env, s, self.dialect) for s in self.snapshots]
        beyond = self._beyond_update(outcomes)
        status = max([*(status for status, _ in updates), *beyond.values(), ExitCode.OK])
        left_alone = [s.name for s, (code, _) in zip(self.snapshots, updates, strict=True) if code != ExitCode.OK]
        updated = sum(count for _, count in updates)
        # the last line agrees with the exit status: the run's verdict above is the run's, this is the command's
        sys.stderr.flush()  # what the update said comes before it
        print(_update_verdict(outcomes, status, updated, left_alone, beyond, len(self.snapshots)), flush=True)
        return status

    def _beyond_update(self, outcomes: Sequence[GuideOutcome]) -> dict[str, ExitCode]:
        """What went wrong in the run in a way no update fixes, said why, each with FAILED: blocks that failed, timed
        out or could not run; blocks left unchecked after a failure or at the deadline. Empty when nothing did."""
        from ci.guide.model import Status

        broken = [r for o in outcomes for r in o.results if r.status.is_failure and r.status is not Status.MISMATCH]
        unchecked = [
            result
            for index, outcome in enumerate(outcomes)
            for result in outcome.results
            if result.status is Status.NOT_RUN
            and result.step.ordinal not in (self.left_out[index] if index < len(self.left_out) else {})
        ]
        found: dict[str, ExitCode] = {}
        if broken:
            print_error(
                f"{plural(len(broken), 'block')} did not pass for a reason other than its output"
                " (failed, timed out or could not run: see above); an update cannot fix that"
            )
            found[f"{plural(len(broken), 'block')} failed, timed out or could not run"] = ExitCode.FAILED
        if unchecked:
            print_error(
                f"{plural(len(unchecked), 'block')} did not run (the run stopped at a failure or its deadline), so"
                " their results were not checked: run the update again"
                + ("" if self.keep_going else ", with --keep-going to check and update every block in one run")
            )
            found[f"{plural(len(unchecked), 'block')} not run"] = ExitCode.FAILED
        return found


def _update_verdict(
    outcomes: Sequence[GuideOutcome],
    status: int,
    updated: int,
    left_alone: Sequence[str],
    beyond: Mapping[str, ExitCode],
    guides: int,
) -> str:
    """The command's last line, agreeing with its exit status: `=== update: UPDATED|PASSED|FAILED: ...`.

    The run's verdict line, above it, tells the run (FAILED when a block
    mismatched); this one tells what the command did about it.
    """
    from ci.guide.model import Status

    mismatches = sum(1 for o in outcomes for r in o.results if r.status is Status.MISMATCH)
    had = f"the run had {plural(mismatches, 'mismatch', 'mismatches')}, {updated} of them rewritten"
    if status == ExitCode.OK:
        if not mismatches:
            return "=== update: PASSED: nothing to update, every block that ran passed"
        guide = "the guide now matches" if guides == 1 else "the guides now match"
        return (
            f"=== update: UPDATED: the run had {plural(mismatches, 'mismatch', 'mismatches')}; every mismatch was"
            f" updated: {guide} this run (review the diff before committing)"
        )
    why = [*beyond, *(f"{name} not (wholly) updated" for name in left_alone)]
    return error_line(f"=== update: FAILED: {had}; {'; '.join(why)} (said above)")
