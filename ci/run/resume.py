"""`ci.run GUIDE --resume DIR`: its options, how they combine with the rest, the run's selection with the resume,
and what the run takes over from the run recorded in DIR (the kept blocks) and what it runs again."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base import frozen
from ci.guide.model import Status
from ci.record.format import RECORD_FILE

if TYPE_CHECKING:
    from ci.guide.model import Plan, Problem, Step
    from ci.record import LastRun, RecordedGuide

__all__ = [
    "RESUME_CHANGED",
    "RESUME_EXIT_STATUS",
    "Pairing",
    "Resume",
    "ResumeRefused",
    "add_resume_options",
    "pair_blocks",
    "plan_resume",
    "resume_run",
    "resume_usage_problem",
    "run_directory",
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
    from ci.guide.model import DocumentError
    from ci.guide.selection import only_idents, select_steps

    try:
        resume = resume_run(args, plans, preset)
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


def resume_run(args: argparse.Namespace, plans: Sequence[Plan], preset: Mapping[str, str]) -> Resume | None:
    """--resume: what the run of the one guide takes over (PRESET: its --set values); None without --resume.
    ResumeRefused says why it cannot be resumed. An unknown --from is left for the selection to say."""
    if not args.resume:
        return None
    plan = plans[0]
    start = next((s for s in plan.steps if args.start in (s.id, s.store, str(s.ordinal))), None) if args.start else None
    return take_resume(
        plan, args.resume, output_dir=args.output_dir, start=start, changed_ok=args.resume_changed, preset=preset
    )


def take_resume(
    plan: Plan,
    run_dir: str,
    *,
    output_dir: str | None,
    start: Step | None,
    changed_ok: bool,
    preset: Mapping[str, str] | None = None,
) -> Resume:
    """What resuming PLAN from the run kept in RUN_DIR takes over; ResumeRefused says why it cannot.

    OUTPUT_DIR is the resumed run's own (None: a new temporary one), never
    RUN_DIR: the earlier run's record stays as it was. START is --from's
    block, when given; PRESET the values --set gives the run.

    The resume holds RUN_DIR (a shared lock; `Resume.hold`, which the
    command closes when the run ends, else the harness's end does): RUN_DIR
    may be an earlier run's temporary output directory, and the making of
    this run's own, or another run's, prunes those that no run holds.
    """
    from ci.record.read import RecordError, read_run
    from ci.run.update import hold_finished_run

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
        resume = plan_resume(plan, recorded, directory, start=start, changed_ok=changed_ok, preset=preset)
    except BaseException:
        if held is not None:
            os.close(held)
        raise
    return resume if held is None else replace(resume, hold=held)


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


if TYPE_CHECKING:
    from ci.guide.model import Plan, Step
    from ci.record.outcome import BlockResult, EarlierRun
    from ci.record.read import RecordedGuide
    from ci.runner.execute import KeptBlock


RESUME_CHANGED = "--resume-changed"  # the flag that keeps blocks changed since the earlier run anyway
LEFTOVER_REASON = "it started a process the earlier run ended at its end"
LEFTOVER_SHARED_REASON = "a process the earlier run ended at its end was started by a block named"
MARKED_REASON = "it is marked rerun_on_resume"
ADDED_REASON = f"it was added since the earlier run ({RESUME_CHANGED})"
FROM_LEFT_OUT = "before --from"  # how the selection says a block --from leaves out


class ResumeRefused(Exception):
    """The run cannot be resumed from that directory: each line says why and what to do (exit 2, nothing run)."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


@frozen
class Resume:
    """What a resumed run of one guide takes over from the run it continues."""

    earlier: EarlierRun  # the run it continues
    kept: Mapping[int, KeptBlock]  # ordinal -> a block that passed there: not run again, reported skipped
    rerun: Mapping[int, str]  # ordinal -> why a block before the start runs again (in plan order)
    start: Step  # the first block run from: the first that did not pass there, or --from's
    stored: Mapping[str, str]  # the values the kept setups stored there, whole (--set still wins)
    notes: tuple[str, ...]  # warnings said before the run: changes let through, values that may be masked
    start_runs: bool = True  # False when the selection (--until) ends before the start
    # the descriptor of the shared hold on the earlier run's directory, kept until the run ends, so that no prune
    # of temporary output directories removes it (this run's own, when it makes one, included); None: not held
    hold: int | None = None

    def apply(self, left_out: dict[int, str]) -> Resume:
        """Make the selection's LEFT_OUT run the blocks that run again and report the kept ones as kept, where the
        start leaves them out (before --from, or before the resume's own start); what --until leaves out stays out,
        and the resume returned no longer says it runs or keeps those."""
        from dataclasses import replace

        taken: set[int] = set()
        for ordinal in (*self.kept, *self.rerun):
            if ordinal < self.start.ordinal and left_out.get(ordinal, FROM_LEFT_OUT).startswith(FROM_LEFT_OUT):
                left_out.pop(ordinal, None)
                taken.add(ordinal)
        return replace(
            self,
            kept={o: block for o, block in self.kept.items() if o in taken},
            rerun={o: why for o, why in self.rerun.items() if o in taken},
            start_runs=self.start.ordinal not in left_out,
        )

    def log_lines(self, steps: Sequence[Step]) -> list[str]:
        """What the log says before the first block: the run continued, what is kept, what runs again, where it starts."""
        by_ordinal = {step.ordinal: step for step in steps}
        lines = [
            f"resuming the run in {self.earlier.directory} (started {self.earlier.started_at}):"
            f" {len(self.kept)} block{'' if len(self.kept) == 1 else 's'} that passed there kept, not run again"
        ]
        for ordinal, why in self.rerun.items():
            step = by_ordinal[ordinal]
            lines.append(f"re-running {step.name} (line {step.line}): {why}")
        if self.start_runs:
            lines.append(f"starting at {self.start.name} (line {self.start.line})")
        else:
            lines.append(f"not starting at {self.start.name} (line {self.start.line}): --until ends the run before it")
        return lines


@frozen
class Pairing:
    """How the blocks of a guide now pair with the blocks an earlier run recorded."""

    pairs: Mapping[int, BlockResult]  # a step's ordinal -> the recorded block it is
    added: tuple[Step, ...]  # steps the earlier run did not have
    removed: tuple[BlockResult, ...]  # recorded blocks the guide no longer has


def _key(step: Step) -> tuple[str, ...]:
    """What pairs a block with a recorded one: its label and its id or store; a block with neither (a plain fence,
    an unnamed setup) has no name to keep when blocks come and go around it, so its body is part of its key."""
    if step.id or step.store:
        return (step.label.value, step.id or "", step.store or "")
    return (step.label.value, "", "", step.code_sha256)


def pair_blocks(steps: Sequence[Step], recorded: Sequence[BlockResult]) -> Pairing:
    """Pair the steps with the recorded blocks by label, id and store, in order (blocks in between may come and
    go: the rest still pair); a pair's body may differ (`code_sha256`). Blocks with neither id nor store pair by
    their body too, so that one inserted among them is added, not the one below it changed; only where as many
    of them stand in the place of as many recorded (their bodies edited in place) do they pair, changed."""
    import difflib  # a resumed run only

    now = [_key(step) for step in steps]
    then = [_key(block.step) for block in recorded]
    pairs: dict[int, BlockResult] = {}
    added: list[Step] = []
    removed: list[BlockResult] = []
    for tag, then_from, then_to, now_from, now_to in difflib.SequenceMatcher(
        None, then, now, autojunk=False
    ).get_opcodes():
        were, are = recorded[then_from:then_to], steps[now_from:now_to]
        if tag == "equal" or (tag == "replace" and _edited_in_place(were, are)):
            for block, step in zip(were, are, strict=True):
                pairs[step.ordinal] = block
            continue
        removed.extend(were)
        added.extend(are)
    return Pairing(pairs, tuple(added), tuple(removed))


def _edited_in_place(were: Sequence[BlockResult], are: Sequence[Step]) -> bool:
    """Whether the steps ARE stand where the recorded blocks WERE one for one, each unnamed then and now with the
    same label: the same blocks, their bodies edited."""
    return len(were) == len(are) and all(
        block.step.label is step.label and not (block.step.id or block.step.store or step.id or step.store)
        for block, step in zip(were, are, strict=True)
    )


_ATTEMPT = re.compile(r".+-attempt-([0-9]+)")  # guide-run.yml's report artifacts: NAME-attempt-N


def run_directory(given: Path) -> Path:
    """Where the run's record is in GIVEN: GIVEN itself (an --output-dir), else its outputs/ (a report directory as
    guide-run.yml uploads it), else the newest attempt's among the report artifacts NAME-attempt-N downloaded into
    it (one directory each); else GIVEN, whose missing results.json reading it says."""
    for candidate in (given, given / "outputs"):
        if (candidate / RECORD_FILE).is_file():
            return candidate
    try:
        entries = list(given.iterdir())
    except OSError:
        return given
    attempts = sorted(
        (int(found[1]), entry) for entry in entries if (found := _ATTEMPT.fullmatch(entry.name)) and entry.is_dir()
    )
    for _, attempt in reversed(attempts):
        for candidate in (attempt / "outputs", attempt):
            if (candidate / RECORD_FILE).is_file():
                return candidate
    return given


def plan_resume(
    plan: Plan,
    recorded: RecordedGuide,
    directory: Path,
    *,
    start: Step | None,
    changed_ok: bool,
    preset: Mapping[str, str] | None = None,
) -> Resume:
    """What resuming PLAN from RECORDED (the run kept in DIRECTORY) takes over, starting at START (else the first
    block that did not pass there); ResumeRefused says why it cannot be. CHANGED_OK (--resume-changed): changes
    before the start are said and let through. PRESET: the values --set gives this run."""
    from ci.base.masking import MASK
    from ci.record.outcome import EarlierRun
    from ci.runner.execute import KeptBlock

    pairing = pair_blocks(plan.steps, recorded.blocks)
    first = start or _natural_start(plan, pairing)
    if first is None:
        raise ResumeRefused(
            [
                f"--resume {directory}: every block of {plan.guide} passed in that run, so there is nothing to"
                " resume; run the guide again, or start at a block with --from ID"
            ]
        )
    earlier = EarlierRun(str(directory), recorded.started_at)
    before = [step for step in plan.steps if step.ordinal < first.ordinal]
    started_leftovers = _leftover_steps(recorded, pairing)
    changes = _changes_before(before, pairing, recorded, first, runs_again=set(started_leftovers), preset=preset or {})
    if changes and not changed_ok:
        raise ResumeRefused(_refusal(plan, directory, changes))
    rerun: dict[int, str] = {}
    kept: dict[int, KeptBlock] = {}
    stored: dict[str, str] = {}
    notes = [f"{RESUME_CHANGED}: {change}; kept as it is" for change in changes]
    problems: list[str] = []
    for step in before:
        block = pairing.pairs.get(step.ordinal)
        if block is None:  # added since (--resume-changed let it through): it never ran
            rerun[step.ordinal] = ADDED_REASON
            continue
        if not block.passed or step.skip_reason is not None:
            continue  # --from starts after it (left out as --from leaves blocks out), or its skip= skips it now
        if step.ordinal in started_leftovers:
            rerun[step.ordinal] = started_leftovers[step.ordinal]
            continue
        if step.rerun_on_resume:
            rerun[step.ordinal] = MARKED_REASON
            continue
        not_compared = _not_compared(step, block, directory)
        if not_compared is not None:
            notes.append(not_compared)
        value = _stored_value(step, block, directory, problems)
        if value is not None and step.store is not None:
            stored[step.store] = value
            if MASK in value:
                notes.append(
                    f"the value of {step.store} recorded in {directory} holds {MASK}: if the record masked a secret"
                    f" there, pass --set {step.store}=VALUE"
                )
        kept[step.ordinal] = KeptBlock(
            earlier=block.kept_from or earlier,
            reason=f"passed in the run this one resumes ({directory})",
            stored=(step.store, value) if step.store is not None and value is not None else None,
            loaded_sha256=block.loaded_sha256,
        )
    if problems:
        raise ResumeRefused(problems)
    return Resume(earlier, kept, rerun, first, stored, tuple(notes))


def _natural_start(plan: Plan, pairing: Pairing) -> Step | None:
    """The first block that did not pass in the earlier run; else the first added after the last it had."""
    for step in plan.steps:
        block = pairing.pairs.get(step.ordinal)
        # a block skipped there by its skip= (and skipped now) is no failure to start at
        if block is not None and not block.passed and not (block.status is Status.SKIPPED and step.skip_reason):
            return step
    last_paired = max(pairing.pairs, default=0)
    return next((step for step in pairing.added if step.ordinal > last_paired), None)


def _changes_before(
    before: Sequence[Step],
    pairing: Pairing,
    recorded: RecordedGuide,
    first: Step,
    *,
    runs_again: set[int],
    preset: Mapping[str, str],
) -> list[str]:
    """Each block before the start that changed, was added or was removed since the earlier run, said in a line;
    a changed block that runs again anyway (RUNS_AGAIN, or marked) is no reason to refuse. A block changed since
    is one whose command, language or `#test-result` differs, or which would load a value given by --set (PRESET)
    other than the one it loaded there."""
    changes = []
    given = dict(preset)  # what --set gives a block, until a setup before it stores the name
    for step in before:
        block = pairing.pairs.get(step.ordinal)
        if block is None:
            changes.append(f"added since: {step.name} (line {step.line})")
        elif block.passed and not (step.rerun_on_resume or step.ordinal in runs_again):
            changes.extend(_changed(step, block, given))
        if step.store is not None:
            given.pop(step.store, None)
    first_then = pairing.pairs.get(first.ordinal)
    end = (
        first_then.step.ordinal
        if first_then is not None
        else max((b.step.ordinal for b in recorded.blocks), default=0) + 1
    )
    changes.extend(
        f"removed since: {block.step.name} (then at line {block.step.line})"
        for block in pairing.removed
        if block.step.ordinal < end
    )
    return changes


def _changed(step: Step, block: BlockResult, given: Mapping[str, str]) -> list[str]:
    """How STEP differs from the recorded BLOCK it pairs with, a line each (none when it does not): its command,
    its language, its `#test-result` (text, wildcards, loads), the values --set now GIVEN it to load."""
    from ci.guide.model import value_sha256

    parts = []
    if block.step.code_sha256 != step.code_sha256:
        parts.append("its command")
    if block.step.language is not step.language:
        parts.append(f"its language ({block.step.language_word} there, {step.language_word} now)")
    then = block.step.result_sha256
    if then is not None and then != step.result_sha256 and step.expected is not None:
        parts.append(f"its #test-result (line {step.expected.line})")
    lines = []
    if parts:
        what = "" if parts == ["its command"] else ": " + " and ".join(parts)
        lines.append(f"changed since: {step.name} (line {step.line}){what}")
    lines.extend(
        f"value changed since: {step.name} (line {step.line}) loads {name}, and --set {name}=... gives it another"
        " value than the one it loaded there"
        for name, digest in block.loaded_sha256.items()
        if name in given and value_sha256(name, given[name]) != digest
    )
    return lines


def _not_compared(step: Step, block: BlockResult, directory: Path) -> str | None:
    """A note for a kept block whose record (an older guide-guard's, before version 6) does not say what its
    `#test-result` was or which values it loaded, so that what changed there since cannot be told; else None."""
    unknown = []
    if step.expected is not None and block.step.result_sha256 is None:
        unknown.append("which #test-result it matched")
    if step.loaded_names and not block.loaded_sha256:
        unknown.append("which values it loaded")
    if not unknown:
        return None
    return (
        f"{step.name} (line {step.line}) is kept as it passed in {directory}, whose record (an older guide-guard's)"
        f" does not say {' nor '.join(unknown)}: if that changed since, start at it with --from {step.name}"
    )


def _refusal(plan: Plan, directory: Path, changes: Sequence[str]) -> list[str]:
    """The refusal: what changed before the start, and the three ways on."""
    return [
        f"--resume {directory}: {plan.guide} changed since that run before the block the resume starts at,"
        " so what passed there may not pass now:",
        *(f"  {change}" for change in changes),
        "run the guide whole, start before the first change with --from ID (it runs from there),"
        f" or pass {RESUME_CHANGED} to keep what passed there anyway",
    ]


def _leftover_steps(recorded: RecordedGuide, pairing: Pairing) -> dict[int, str]:
    """The ordinals (now) of the blocks that started a process the earlier run ended when it ended, and why each
    runs again. The record names a block as the log does; where blocks share that name (setups storing one
    name, without ids), each of them that passed there runs again, as the record cannot tell which one it was."""
    named: dict[str, list[int]] = {}
    for ordinal, block in pairing.pairs.items():
        named.setdefault(block.step.name, []).append(ordinal)
    found: dict[int, str] = {}
    for name in recorded.leftovers_started_by:
        ordinals = named.get(name, [])
        for ordinal in ordinals:
            found[ordinal] = LEFTOVER_REASON if len(ordinals) == 1 else f"{LEFTOVER_SHARED_REASON} {name}"
    return found


def _stored_value(step: Step, block: BlockResult, directory: Path, problems: list[str]) -> str | None:
    """The value the kept setup stored in the earlier run, exactly: from the file holding it whole, else from the
    setup's own stdout there (read as the run read it), else (a block that run kept in turn, its value short and
    recorded as it was) from the record; None (a problem said) when it cannot be had."""
    from ci.runner.stored import stored_text

    if step.store is None:
        return None
    cut = block.stored[1].path if block.stored and not block.stored[1].complete else None
    source = cut or (block.stdout_path if block.status is Status.PASSED else None)
    if source is not None:
        try:
            return stored_text(Path(source))
        except OSError as exc:
            why = f"its file {source} cannot be read ({exc.strerror or exc})"
    elif step.store in block.captured:
        return block.captured[step.store]
    elif block.status is Status.PASSED:
        return ""  # it printed nothing: the record keeps no empty stdout file
    else:
        why = "the record keeps only its head"
    problems.append(
        f"--resume {directory}: the value {step.store} that {step.name} (line {step.line}) stored there cannot be"
        f" taken: {why}; pass --set {step.store}=VALUE, or start at that setup with --from {step.name}"
    )
    return None
