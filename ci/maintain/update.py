"""Updating guides from a finished run: rewrite mismatched `#test-result` bodies (a console session's changed
outputs) in place, every other byte kept."""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.core.dialects.pycon import CONSOLE_LANGUAGE
from ci.core.disk import os_error_text
from ci.core.files import write_atomically
from ci.core.match import matches
from ci.core.model import DocumentError, Label, Plan, Status, Step
from ci.core.placeholders import substitute
from ci.core.source import read_local_guide, redact_url
from ci.core.text import MASK, Masker, secret_values
from ci.maintain.console_update import rewrite_console
from ci.maintain.guide import plan_without_running
from ci.maintain.lastrun import read_stdout, recheck
from ci.maintain.realign import CannotRewrite, updated_body
from ci.record import LastRun, RecordedBlock, RecordedGuide, RecordError

__all__ = ["GuideNotUpdatable", "GuideSnapshot", "GuideUpdate", "SourceLines", "snapshot_guide", "update_guide"]

MAX_BODY_BYTES = 1024 * 1024  # an expected body larger than this does not belong in a guide


class GuideNotUpdatable(Exception):
    """A guide that cannot be updated from the run at all (nothing of it is changed); `problems` says why."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class GuideUpdate:
    """What updating one guide did."""

    guide: str  # as named on the command line
    notes: tuple[str, ...]  # every mismatch left alone, and why
    diff: tuple[str, ...]  # the unified diff of the change written, one line each; empty when nothing was written
    updated: int  # how many #test-result bodies were rewritten (a console session's expected output: one)
    not_written: str | None  # why the rewritten guide was not written (it would not read back as meant), if it was not
    # a console session: the `>>> ` line of each statement whose output lines were rewritten; () otherwise
    statements: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every mismatch of the guide was updated (or there was none)."""
        return not self.notes and self.not_written is None


class SourceLines:
    """A guide's text as lines with their own endings, so edits leave every other byte alone."""

    _SPLIT = re.compile(r"(\r\n|\r|\n)")  # the line breaks markdown-it counts

    def __init__(self, text: str) -> None:
        parts = self._SPLIT.split(text)
        self.lines = parts[0::2]  # content of line N+1 at index N
        self.endings = [*parts[1::2], ""]

    def text(self) -> str:
        return "".join(line + ending for line, ending in zip(self.lines, self.endings, strict=True))

    def replace_body(self, fence_line: int, old_body: str, new_body: str) -> None:
        """Put `new_body` in place of the body of the fence opening at `fence_line` (1-based).

        CannotRewrite when the body cannot be located safely or the new body
        would end the fence early.
        """
        opening = fence_line - 1
        fence = re.search(r"`{3,}|~{3,}", self.lines[opening])
        if fence is None:
            raise CannotRewrite(f"line {fence_line} opens no fence")
        old_lines = old_body.split("\n") if old_body else []
        prefixes = []
        for offset, content in enumerate(old_lines):
            index = opening + 1 + offset
            if index >= len(self.lines) or not self.lines[index].endswith(content):
                raise CannotRewrite(f"the body of the fence at line {fence_line} does not sit where the parser saw it")
            prefixes.append(self.lines[index][: len(self.lines[index]) - len(content)])
        closing = opening + 1 + len(old_lines)
        while closing < len(self.lines) and not self.lines[closing].strip(" \t>"):
            closing += 1
        run = fence.group(0)
        closes = re.compile(rf"[ \t>]*{re.escape(run[0])}{{{len(run)},}}[ \t]*")
        if closing >= len(self.lines) or not closes.fullmatch(self.lines[closing]):
            raise CannotRewrite(f"the fence at line {fence_line} is not closed")
        early = re.compile(rf" {{0,3}}{re.escape(run[0])}{{{len(run)},}}[ \t]*")
        new_lines = new_body.split("\n") if new_body else []
        if any(early.fullmatch(line) for line in new_lines):
            raise CannotRewrite(f"the new output holds a line that would close the fence ({run}); use a longer fence")
        written = [p for p, content in zip(prefixes, old_lines, strict=True) if content]
        prefix = written[0] if written else re.sub(r"[^>\s]", " ", self.lines[opening][: fence.start()])
        ending = self.endings[opening] or "\n"
        start = opening + 1
        self.lines[start : start + len(old_lines)] = [prefix + line if line else prefix.rstrip() for line in new_lines]
        self.endings[start : start + len(old_lines)] = [ending] * len(new_lines)


@dataclass(frozen=True)
class _Rewrite:
    """One `#test-result` to rewrite."""

    test_id: str
    result_line: int  # line of the result's opening fence
    old_body: str
    new_body: str
    values: Mapping[str, str]  # placeholder -> value used by the run
    tokens: tuple[str, ...]
    output: str


def _masked_since(block: RecordedBlock) -> bool:
    """Whether the block's stdout file is smaller than what it wrote: --mask-files replaced a secret by *** in it."""
    try:
        size = block.stdout_file.stat().st_size if block.stdout_file is not None else 0
    except OSError:
        return False
    return block.stdout_bytes is not None and size < block.stdout_bytes


def _unpublishable(new_body: str, block: RecordedBlock, masker: Masker) -> str | None:
    """Why NEW_BODY, expected output taken from BLOCK's stdout, is not put in the guide, ending `left alone` and the
    fix if there is one; None when it can be."""
    wildcard = "left alone (match that part with a wildcard)"
    if "\r" in new_body or "\0" in new_body:  # Markdown reads CR as a line break, NUL as U+FFFD
        return f"the output holds a carriage return (CR) or a NUL byte, which a Markdown code block cannot hold; {wildcard}"
    if masker.holds_secret(new_body):  # a guide is published: no form of a secret the block printed goes in
        return "the new expected body would hold a secret value the block printed; left alone"
    if MASK in new_body and _masked_since(block):
        return (
            f"the run's output file was masked (--mask-files), and the new expected body would hold {MASK} where the"
            f" block printed a secret value, which no later run prints; {wildcard}"
        )
    if len(new_body.encode("utf-8")) > MAX_BODY_BYTES:
        return f"the new expected body would hold over {MAX_BODY_BYTES} bytes; left alone"
    return None


def _rewrites(plan: Plan, recorded: RecordedGuide, notes: list[str], masker: Masker) -> list[_Rewrite]:
    """The result bodies to rewrite; blocks that cannot be rewritten are explained in `notes`."""
    tests: dict[str, Step] = {s.id: s for s in plan.steps if s.label is Label.TEST and s.id}
    rewrites = []
    for block in recorded.blocks:
        if block.label is not Label.TEST or block.status is not Status.MISMATCH or block.id is None:
            continue
        step = tests.get(block.id)
        where = f"{plan.guide}: #test id={block.id!r}"
        if step is None or step.expected is None:
            notes.append(f"{where} is no longer in the guide; left alone")
            continue
        expected = step.expected
        check = recheck(recorded, block, step, [expected.body])
        if check.command_changed:
            notes.append(f"{where}: the command changed since that run, so its output may be stale; left alone")
            continue
        if check.missing:
            notes.append(f"{where}: the run's value of {', '.join(check.missing)} is unknown; left alone")
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
        elif (why := _unpublishable(new_body, block, masker)) is not None:
            notes.append(f"{where}: {why}")
        elif new_body != expected.body:
            rewrites.append(
                _Rewrite(block.id, expected.line, expected.body, new_body, check.values, expected.fuzzy, output)
            )
    return rewrites


def _read_back(text: str, name: str, rewrites: Sequence[_Rewrite]) -> tuple[_Rewrite | None, str] | None:
    """Why the rewritten guide does not read back as intended, and the rewrite at fault (None: the whole guide);
    None when it reads back as intended."""
    try:
        plan = plan_without_running(text, name, source_path=name)
    except DocumentError as error:
        return None, f"it no longer plans: {error.problems[0]}"
    tests = {s.id: s for s in plan.steps if s.label is Label.TEST}
    for rewrite in rewrites:
        expected = tests[rewrite.test_id].expected if rewrite.test_id in tests else None
        if expected is None or expected.body != rewrite.new_body:
            return rewrite, f"#test-result id={rewrite.test_id!r} reads back differently"
        if not matches(rewrite.output, substitute(expected.body, tuple(rewrite.values.items())), expected.fuzzy):
            return rewrite, f"#test-result id={rewrite.test_id!r} would still mismatch"
    return None


def _checked(
    name: str, text: str, rewrites: list[_Rewrite], notes: list[str]
) -> tuple[str, list[_Rewrite], str | None]:
    """The guide's new text, with every rewrite that fits and reads back as meant; those rewrites; and why no text
    can be written (the rewritten guide no longer plans), if so. A rewrite that does not read back goes to `notes`,
    and the others are still made."""
    new_text, done = _rewritten(name, text, rewrites, notes)
    while new_text != text:
        fault = _read_back(new_text, name, done)
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
            notes.append(f"{name}: #test-result id={rewrite.test_id!r}: {exc}; left alone")
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


def _console_update(
    text: str, plan: Plan, recorded: RecordedGuide, notes: list[str], masker: Masker, dialect: str
) -> tuple[str, tuple[int, ...]]:
    """A console session's guide with the output lines of its changed statements rewritten from the run, and those
    statements' lines; the text as it was when nothing can be (why, in NOTES)."""
    (step,) = plan.steps
    where = f"{plan.guide}:{step.line}"
    block = next((each for each in recorded.blocks if each.ordinal == step.ordinal), None)
    if block is None or block.status is not Status.MISMATCH:
        return text, ()
    if step.expected is None:
        notes.append(f"{where}: the session no longer gives any output to check; left alone")
        return text, ()
    if block.code_sha256 and block.code_sha256 != step.code_sha256:
        notes.append(f"{where}: the session changed since that run, so its output may be stale; left alone")
        return text, ()
    try:
        output = read_stdout(block)
        rewrite = rewrite_console(text, plan.guide, output)
    except (OSError, RecordError, CannotRewrite) as exc:  # read_stdout's, and an output not attributed or written
        notes.append(f"{exc if isinstance(exc, CannotRewrite) else f'{where}: {exc}'}; left alone")
        return text, ()
    why = _unpublishable(rewrite.written, block, masker)
    if why is not None:
        notes.append(f"{where}: {why}")
        return text, ()
    try:  # read back as a run will read it
        expected = plan_without_running(rewrite.text, plan.guide, source_path=plan.guide, dialect=dialect)
    except DocumentError as error:
        notes.append(f"{where}: the rewritten guide would no longer plan: {error.problems[0]}; left alone")
        return text, ()
    read_back = expected.steps[0].expected if len(expected.steps) == 1 else None
    if rewrite.statements and (read_back is None or not matches(output, read_back.body, read_back.fuzzy)):
        notes.append(f"{where}: the rewritten session would still mismatch; left alone")
        return text, ()
    return rewrite.text, rewrite.statements


def update_guide(
    name: str,
    run: LastRun,
    *,
    mask_env: Sequence[str] = (),
    snapshot: GuideSnapshot | None = None,
    dialect: str = "labels",
) -> GuideUpdate:
    """Rewrite, in the local guide NAME, the `#test-result` bodies that mismatched in RUN; nothing is run.

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
    try:
        plan = plan_without_running(text, name, source_path=name, dialect=dialect)
    except DocumentError as error:
        raise GuideNotUpdatable([str(problem) for problem in error.problems]) from None
    recorded = run.guide_for(name)
    if recorded is None:
        known = ", ".join(g.guide for g in run.guides) or "none"
        raise GuideNotUpdatable([f"{name} is not a guide of the run in {run.directory} (its guides: {known})"])
    masker = Masker.of(secret_values({**os.environ, **plan.settings.env}, mask_env))
    notes: list[str] = []
    statements: tuple[int, ...] = ()
    if [step.language_word for step in plan.steps] == [CONSOLE_LANGUAGE]:  # only the pycon dialect writes that word
        new_text, statements = _console_update(text, plan, recorded, notes, masker, dialect)
        updated, why_not = (1 if statements else 0), None
    else:
        new_text, rewrites, why_not = _checked(name, text, _rewrites(plan, recorded, notes, masker), notes)
        updated = len(rewrites)
    notes = [masker.mask(note) for note in notes]  # a note may quote the output
    if why_not is not None or new_text == text:
        return GuideUpdate(name, tuple(notes), diff=(), updated=0, not_written=why_not)
    diff = difflib.unified_diff(
        text.splitlines(keepends=True), new_text.splitlines(keepends=True), f"a/{name}", f"b/{name}"
    )
    why_not = _write(path, bom + new_text)
    if why_not is not None:
        return GuideUpdate(name, tuple(notes), diff=(), updated=0, not_written=why_not)
    lines = tuple(masker.mask(line if line.endswith(("\n", "\r")) else line + "\n") for line in diff)
    return GuideUpdate(name, tuple(notes), lines, updated=updated, not_written=None, statements=statements)
