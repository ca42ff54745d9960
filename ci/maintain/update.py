"""Updating guides from a finished run: rewrite mismatched `#test-result` bodies in place, every other byte kept.

A plain-fence guide (docs/authoring.md, section 10) has no `#test-result`: there the
```text fence after a block whose search failed is rewritten, kept an excerpt. A
console session gets its changed statements' output lines rewritten.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.base import frozen
from ci.base.files import os_error_text, write_atomically
from ci.base.text import Masker, installed, masked, policy, secret_values
from ci.expect.match import matches
from ci.expect.search import search_matches
from ci.guide.dialects.fences import UPSTREAM_REF, upstream_ref
from ci.guide.model import DocumentError, Label, Plan, Status, Step, body_sha256
from ci.guide.placeholders import substitute
from ci.guide.source import read_local_guide, redact_url
from ci.maintain.console_update import updated_session
from ci.maintain.excerpt import updated_excerpt
from ci.maintain.guide import dialect_of, plan_without_running
from ci.maintain.lastrun import Recheck, misread_by, read_stdout, recheck
from ci.maintain.realign import CannotRewrite, updated_body
from ci.maintain.rewrite import SourceLines, unpublishable
from ci.record import LastRun, RecordedGuide, RecordError
from ci.record.outcome import BlockResult

__all__ = ["GuideNotUpdatable", "GuideSnapshot", "GuideUpdate", "SourceLines", "snapshot_guide", "update_guide"]


class GuideNotUpdatable(Exception):
    """A guide that cannot be updated from the run at all (nothing of it is changed); `problems` says why."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@frozen
class GuideSnapshot:
    """A local guide as it was before a run read it: an update from that run replaces only this content."""

    name: str  # as named on the command line
    path: Path  # absolute: the run moves to --workdir before its first block
    content: bytes


def snapshot_guide(name: str) -> GuideSnapshot:
    """The guide NAME as it is now, to update it after a run; GuideNotUpdatable when it is a URL or unreadable."""
    if "://" in name:
        raise GuideNotUpdatable([f"{redact_url(name)}: only a local guide can be updated; name its file"])
    path = Path(name).absolute()
    try:
        return GuideSnapshot(name, path, read_local_guide(path, name))
    except DocumentError as error:
        raise GuideNotUpdatable([f"{name}: {problem.message}" for problem in error.problems]) from None


@frozen
class GuideUpdate:
    """What updating one guide did."""

    guide: str  # as named on the command line
    notes: tuple[str, ...]  # every mismatch left alone, and why
    diff: tuple[str, ...]  # the unified diff of the change written, one line each; empty when nothing was written
    updated: int  # how many #test-result bodies were rewritten (a console session's expected output: one)
    not_written: str | None  # why the rewritten guide was not written (it would not read back as meant), if it was not
    unit: str = "#test-result block"  # what a rewritten body is, as the summary counts them ("```text fence")
    # a console session: the `>>> ` line of each statement whose output lines were rewritten; () otherwise
    statements: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every mismatch of the guide was updated (or there was none)."""
        return not self.notes and self.not_written is None


@frozen
class _Rewrite:
    """One `#test-result` to rewrite (or a plain-fence guide's ```text fence)."""

    test_id: str  # the #test's id; a plain-fence block's ordinal, `#N`
    result_line: int  # line of the result's opening fence
    old_body: str
    new_body: str
    values: Mapping[str, str]  # placeholder -> value used by the run
    tokens: tuple[str, ...]
    output: str
    search: bool = False  # the body is searched for in the output (plain fences), not matched whole

    @property
    def name(self) -> str:
        """The result as notes name it."""
        if self.search:
            return f"the ```text fence at line {self.result_line} (block {self.test_id})"
        return f"#test-result id={self.test_id!r}"

    def found(self, body: str) -> bool:
        """Whether BODY (as written, load placeholders in place) passes against the output it is rewritten from."""
        pattern = substitute(body, tuple(self.values.items()))
        return search_matches(self.output, pattern) if self.search else matches(self.output, pattern, self.tokens)


def _key(step: Step) -> str | None:
    """How a rewrite names its step: a plain-fence block (searched) by its ordinal, a #test by its id."""
    searched = step.expected is not None and step.expected.search
    return f"#{step.ordinal}" if searched else step.id


def _rewrites(plan: Plan, recorded: RecordedGuide, notes: list[str]) -> list[_Rewrite]:
    """The result bodies to rewrite; blocks that cannot be rewritten are explained in `notes`."""
    tests: dict[str, Step] = {s.id: s for s in plan.steps if s.label is Label.TEST and s.id}
    rewrites = []
    for block in recorded.blocks:
        if block.step.label is not Label.TEST or block.status is not Status.MISMATCH or block.step.id is None:
            continue
        step = tests.get(block.step.id)
        where = f"{plan.guide}: #test id={block.step.id!r}"
        if step is None or step.expected is None:
            notes.append(f"{where} is no longer in the guide; left alone")
            continue
        expected = step.expected
        check = recheck(recorded, block, step, [expected.body])
        if (stale := _stale(check, check.command_changed)) is not None:
            notes.append(f"{where}: {stale}")
            continue
        try:
            output = read_stdout(block)
        except (OSError, RecordError) as exc:  # read_stdout's: the file is gone, or larger than it reads
            notes.append(f"{where}: {exc}; left alone")
            continue
        try:
            new_body = updated_body(expected.body, output, expected.fuzzy, check.values)
        except CannotRewrite as exc:
            notes.append(f"{where}: {exc}; left alone")
            continue
        if new_body is None:
            notes.append(
                f"{where}: the output cannot be written as an expected body (it reads differently); left alone"
            )
        elif (why := unpublishable(new_body, block)) is not None:
            notes.append(f"{where}: {why}")
        elif new_body != expected.body:
            rewrites.append(
                _Rewrite(block.step.id, expected.line, expected.body, new_body, check.values, expected.fuzzy, output)
            )
    return rewrites


def _searched_rewrites(plan: Plan, recorded: RecordedGuide, notes: list[str]) -> list[_Rewrite]:
    """A plain-fence guide's: the ```text fences whose search failed, each rewritten as an excerpt of its block's
    output (updated_excerpt). A block has no id there: the run's block and the guide's are paired by their ordinal,
    and the command's digest says whether it is still the one that ran. A block that failed otherwise (its exit
    status) is no mismatch, and a block without a ```text fence never mismatches: neither gets one."""
    steps = {step.ordinal: step for step in plan.steps}
    rewrites = []
    for block in recorded.blocks:
        if block.status is not Status.MISMATCH:
            continue
        step = steps.get(block.step.ordinal)
        where = f"{plan.guide}: block #{block.step.ordinal} (line {block.step.line} when it ran)"
        if step is None or step.expected is None or not step.expected.search:
            notes.append(f"{where}: no longer a ```shell fence followed by a ```text fence in the guide; left alone")
            continue
        expected = step.expected
        where = f"{plan.guide}:{expected.line}: the ```text fence of block #{block.step.ordinal}"
        check = recheck(recorded, block, step, [expected.body])
        if (stale := _stale(check, check.command_changed and not _ran_with_ref(step, block, check.values))) is not None:
            notes.append(f"{where}: {stale}")
            continue
        try:
            output = read_stdout(block)
            new_body = updated_excerpt(expected.body, output, check.values)
        except (OSError, RecordError, CannotRewrite) as exc:  # read_stdout's, updated_excerpt's
            notes.append(f"{where}: {exc}; left alone")
            continue
        if new_body is None:
            empty = not output.strip()
            notes.append(
                f"{where}: the block printed nothing but blanks, which a ```text fence cannot expect; left alone"
                " (remove the fence, or make the command print)"
                if empty
                else f"{where}: its output cannot be written so that the search finds it; left alone"
            )
        elif (why := unpublishable(new_body, block)) is not None:
            notes.append(f"{where}: {why}")
        elif new_body != expected.body:
            rewrites.append(
                _Rewrite(
                    f"#{block.step.ordinal}",
                    expected.line,
                    expected.body,
                    new_body,
                    check.values,
                    (),
                    output,
                    search=True,
                )
            )
    return rewrites


def _stale(check: Recheck, command_changed: bool) -> str | None:
    """Why the run's output cannot be trusted for the rewrite (its command changed, a value it loaded is unknown),
    ending `left alone`; None when it can."""
    if command_changed:
        return "the command changed since that run, so its output may be stale; left alone"
    if check.missing:
        return f"the run's value of {', '.join(check.missing)} is unknown; left alone"
    return None


def _ran_with_ref(step: Step, block: BlockResult, values: Mapping[str, str]) -> bool:
    """Whether BLOCK ran STEP's command with `<UPSTREAM_REF>` put in its text, as a run does with the value of the
    environment's UPSTREAM_REF (this one's, or the one the expected text shows the run had)."""
    placeholder = f"<{UPSTREAM_REF}>"
    refs = {upstream_ref(os.environ), os.environ.get(UPSTREAM_REF), values.get(UPSTREAM_REF)} - {None, ""}
    return placeholder in step.body and any(
        body_sha256(step.body.replace(placeholder, ref)) == block.step.code_sha256 for ref in refs if ref is not None
    )


def _read_back(text: str, name: str, rewrites: Sequence[_Rewrite], dialect: str) -> tuple[_Rewrite | None, str] | None:
    """Why the rewritten guide does not read back as intended (in DIALECT, as ci.run's --dialect), and the rewrite at
    fault (None: the whole guide); None when it reads back as intended."""
    try:
        plan = plan_without_running(text, name, source_path=name, dialect=dialect)
    except DocumentError as error:
        return None, f"it no longer plans: {error.problems[0]}"
    tests = {_key(s): s for s in plan.steps if s.label is Label.TEST}
    for rewrite in rewrites:
        expected = tests[rewrite.test_id].expected if rewrite.test_id in tests else None
        if expected is None or expected.body != rewrite.new_body or expected.search != rewrite.search:
            return rewrite, f"{rewrite.name} reads back differently"
        if not rewrite.found(expected.body):
            return rewrite, f"{rewrite.name} would still mismatch"
    return None


def _checked(
    name: str, text: str, rewrites: list[_Rewrite], notes: list[str], dialect: str
) -> tuple[str, list[_Rewrite], str | None]:
    """The guide's new text, with every rewrite that fits and reads back as meant; those rewrites; and why no text
    can be written (the rewritten guide no longer plans), if so. A rewrite that does not read back goes to `notes`,
    and the others are still made."""
    new_text, done = _rewritten(name, text, rewrites, notes)
    while new_text != text:
        fault = _read_back(new_text, name, done, dialect)
        if fault is None:
            return new_text, done, None
        rewrite, why = fault
        if rewrite is None:
            return text, [], why
        notes.append(f"{name}: {why} once written; left alone")
        new_text, done = _rewritten(name, text, [r for r in done if r is not rewrite], notes)
    return text, [], None


def _read_local_guide(name: str, path: Path, before: bytes | None) -> tuple[str, str]:
    """The guide's byte-order mark (if any) and its text after it; GuideNotUpdatable when it cannot be read, or
    when its content is no longer BEFORE (when given: the guide as the run read it)."""
    if "://" in name:
        raise GuideNotUpdatable([f"{redact_url(name)}: only a local guide can be updated; name its file"])
    try:
        raw = read_local_guide(path, name)
        text = raw.decode("utf-8")
    except DocumentError as error:
        raise GuideNotUpdatable([f"{name}: {problem.message}" for problem in error.problems]) from None
    except UnicodeDecodeError as exc:
        raise GuideNotUpdatable([f"{name}: cannot read the guide: {exc}"]) from None
    if before is not None and raw != before:
        raise GuideNotUpdatable(
            [
                f"{name}: the guide changed on disk during the run (edited, or written by a block), so it was not"
                " updated: that change is kept. Check it, then run the update again"
            ]
        )
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return bom, text[len(bom) :]


def _rewritten(name: str, text: str, rewrites: list[_Rewrite], notes: list[str]) -> tuple[str, list[_Rewrite]]:
    """The guide's text with every rewrite that fits put in place, and those rewrites; the others go to `notes`."""
    source = SourceLines(text)
    done = list(rewrites)
    for rewrite in sorted(rewrites, key=lambda r: r.result_line, reverse=True):
        try:
            source.replace_body(rewrite.result_line, rewrite.old_body, rewrite.new_body)
        except CannotRewrite as exc:
            notes.append(f"{name}: {rewrite.name}: {exc}; left alone")
            done = [r for r in done if r is not rewrite]
    return source.text(), done


def _write(path: Path, text: str) -> str | None:
    """Replace the guide at PATH by TEXT, through a symbolic link to the file it names (the link stays a link);
    why it was not written, if it was not: a read-only file (which a rename would replace all the same), a
    read-only directory (the new content goes to a file beside the guide first), a full disk."""
    real = Path(os.path.realpath(path))
    try:
        mode = os.stat(real).st_mode
        if not mode & 0o222:
            return f"the file is read-only (mode {stat.S_IMODE(mode):o}): make it writable (chmod u+w) to update it"
        write_atomically(real, text, updating=True)
    except OSError as exc:
        where = real.parent
        return f"it could not be written ({os_error_text(exc, where)}; the new content goes to a file in {where} first)"
    return None


def _paired(name: str, text: str, run: LastRun, dialect: str) -> tuple[Plan, RecordedGuide, str]:
    """The guide's plan read in DIALECT, its record in RUN and the dialect it is read in; GuideNotUpdatable when
    it has document errors, is not one of the run's guides, or reads otherwise than the run read it."""
    try:
        plan = plan_without_running(text, name, source_path=name, dialect=dialect)
    except DocumentError as error:
        raise GuideNotUpdatable([str(problem) for problem in error.problems]) from None
    recorded = run.guide_for(name)
    if recorded is None:
        known = ", ".join(g.guide for g in run.guides) or "none"
        raise GuideNotUpdatable([f"{name} is not a guide of the run in {run.directory} (its guides: {known})"])
    read_as = dialect_of(text, name, dialect)
    if (misread := misread_by(read_as, plan, recorded)) is not None:  # results.json does not say how it was read
        raise GuideNotUpdatable(
            [
                f"{name}: read with --dialect {dialect}, {misread}, in the run in {run.directory}: update it with the"
                " --dialect that run was given (fences, pycon), or name the dialect in its front matter (ci.dialect)"
            ]
        )
    return plan, recorded, read_as


def update_guide(
    name: str,
    run: LastRun,
    *,
    mask_env: Sequence[str] = (),
    snapshot: GuideSnapshot | None = None,
    dialect: str = "labels",
    preset: Mapping[str, str] | None = None,
) -> GuideUpdate:
    """Rewrite, in the local guide NAME, the `#test-result` bodies that mismatched in RUN; nothing is run.

    The guide is read in DIALECT as ci.run's --dialect reads it (its front
    matter's ci.dialect wins); read as plain fences, the ```text fences whose
    search failed are rewritten instead (_searched_rewrites).

    The guide is written (whole or not at all) only when it reads back with
    every rewritten body matching the output it was rewritten from. A body
    that would hold a secret value (of this environment and the guide's
    `ci.env`, as a run masks them; MASK_ENV names more) is left alone, and the
    diff shows none.
    With SNAPSHOT (the guide as RUN read it, taken before), the file is read
    at its path, and a guide whose content is no longer the snapshot's is not
    touched.
    GuideNotUpdatable when the guide cannot be read, has document errors, is
    not one of the run's guides, or changed since SNAPSHOT.
    DIALECT is how the run read the guide (ci.run's --dialect; the front
    matter's ci.dialect wins). A console session (pycon) gets the output lines
    of its changed statements rewritten inside its fence (ci.maintain.console_update).
    """
    path = snapshot.path if snapshot is not None else Path(name)
    bom, text = _read_local_guide(name, path, snapshot.content if snapshot is not None else None)
    plan, recorded, read_as = _paired(name, text, run, dialect)
    # what this environment and the guide's ci.env hold secret, as a run masks them, and what the policy in force
    # already masks (the run's, which knows `--set` values): the policy of the update
    secrets = [*policy().values, *secret_values({**os.environ, **plan.settings.env}, mask_env)]
    secrets += secret_values(preset or {}, mask_env)  # --set values, secret by the same rule
    with installed(Masker.of(secrets)):
        notes: list[str] = []
        statements: tuple[int, ...] = ()
        searched = read_as == "fences"
        if read_as == "pycon":
            new_text, statements = updated_session(text, plan, recorded, notes, dialect)
            updated, why_not = (1 if statements else 0), None
        else:
            planned = (_searched_rewrites if searched else _rewrites)(plan, recorded, notes)
            new_text, rewrites, why_not = _checked(name, text, planned, notes, dialect)
            updated = len(rewrites)
        notes = [masked(note) for note in notes]  # a note may quote the output
        unit = "```text fence" if searched else "#test-result block"
        if why_not is not None or new_text == text:
            return GuideUpdate(name, tuple(notes), diff=(), updated=0, not_written=why_not, unit=unit)
        diff = difflib.unified_diff(
            text.splitlines(keepends=True), new_text.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
        why_not = _write(path, bom + new_text)
        if why_not is not None:
            return GuideUpdate(name, tuple(notes), diff=(), updated=0, not_written=why_not, unit=unit)
        lines = tuple(masked(line if line.endswith(("\n", "\r")) else line + "\n") for line in diff)
        return GuideUpdate(
            name, tuple(notes), lines, updated=updated, not_written=None, unit=unit, statements=statements
        )
