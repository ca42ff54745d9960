"""The last run as maintenance reads it: its block outputs, the values it loaded, and results re-checked against it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.base import frozen
from ci.base.text import MASK, plural
from ci.expect.match import Blame, blame_file, blame_text
from ci.guide.model import Expected, Plan, Status, Step
from ci.guide.placeholders import substitute
from ci.record import RecordedGuide, RecordError
from ci.record.outcome import BlockResult

__all__ = ["STDOUT_LIMIT_BYTES", "Recheck", "misread_by", "read_stdout", "recheck", "resolve_loads"]

STDOUT_LIMIT_BYTES = 8 * 1024 * 1024  # a block output larger than this is not read into memory here


def read_stdout(block: BlockResult, limit_bytes: int = STDOUT_LIMIT_BYTES) -> str:
    """The block's stdout as the matcher reads it (UTF-8, invalid bytes replaced); "" when it was empty.

    OSError when the file is missing; RecordError when it is larger than `limit_bytes`.
    """
    if block.stdout_path is None:
        return ""
    size = Path(block.stdout_path).stat().st_size
    if size > limit_bytes:
        raise RecordError(f"{block.stdout_path} holds {size} bytes, more than the {limit_bytes} this reads")
    return Path(block.stdout_path).read_bytes().decode("utf-8", errors="replace")


def resolve_loads(
    guide: RecordedGuide,
    test: BlockResult,
    loads: Sequence[tuple[str, str]],
    bodies_as_run: Sequence[str] = (),
) -> tuple[dict[str, str], list[str]]:
    """Values the run substituted into a `#test-result`: {placeholder: value}, and the names not found.

    `loads` are the result's (NAME, PLACEHOLDER) pairs. A value comes from the
    last setup before the test that captured NAME (unless the record masked it
    as a secret); a name given with `--set`
    is captured by no block, so it is read back from the expected body the
    run recorded, by aligning it with a body the run may have used
    (`bodies_as_run`, as written, placeholders in place).
    """
    values: dict[str, str] = {}
    missing: list[str] = []
    for name, placeholder in loads:
        setups = [b for b in guide.blocks if b.step.ordinal < test.step.ordinal and name in b.captured]
        # a value the record masked as a secret is no value: never write the mask (or the secret) back
        if setups and MASK not in setups[-1].captured[name]:
            values[placeholder] = setups[-1].captured[name]
    unresolved = [placeholder for _, placeholder in loads if placeholder not in values]
    expected = test.expected.whole if test.expected is not None else None
    if unresolved and expected is not None:
        for body in bodies_as_run:
            found = _infer_values(body, expected, unresolved, values)
            if found is not None:
                values.update(found)
                break
    for name, placeholder in loads:
        if placeholder not in values:
            missing.append(name)
    return values, missing


def _infer_values(
    body: str, expected: str, placeholders: Sequence[str], known: Mapping[str, str]
) -> dict[str, str] | None:
    """Recover placeholder values by aligning a body as written with the body the run substituted.

    Bodies are a few lines long, so a regular expression with back-references
    is fine here (it never sees a block's output).
    """
    wanted = {f"<{p}>": p for p in placeholders}
    known_text = {f"<{p}>": v for p, v in known.items()}
    names = sorted({*wanted, *known_text}, key=len, reverse=True)
    if not names:
        return None
    pattern: list[str] = []
    groups: dict[str, str] = {}
    position = 0
    for found in re.finditer("|".join(re.escape(n) for n in names), body):
        pattern.append(re.escape(body[position : found.start()]))
        text = found.group(0)
        if text in known_text:
            pattern.append(re.escape(known_text[text]))
        elif text in groups:
            pattern.append(f"(?P={groups[text]})")
        else:
            groups[text] = f"g{len(groups)}"
            pattern.append(f"(?P<{groups[text]}>.*?)")
        position = found.end()
    pattern.append(re.escape(body[position:]))
    matched = re.fullmatch("".join(pattern), expected, re.DOTALL)
    if matched is None:
        return None
    return {wanted[text]: matched.group(group) for text, group in groups.items() if text in wanted}


@frozen
class Recheck:
    """A `#test-result` as the guide writes it now, set against what its `#test` printed in the recorded run."""

    test: BlockResult  # the `#test` as the run recorded it
    expected: Expected  # the result as the guide writes it now
    command_changed: bool  # the `#test`'s command is no longer the one that ran (by code_sha256)
    values: Mapping[str, str]  # placeholder -> the value the run substituted
    missing: tuple[str, ...]  # loaded names whose value the run did not keep: nothing to re-check with

    @property
    def expected_body(self) -> str:
        """The expected body with the run's values substituted, as the matcher reads it."""
        return substitute(self.expected.body, tuple(self.values.items())).rstrip("\n")

    def first_unmatched_line(self) -> int | None:
        """The first expected line (1-based in the body) the recorded stdout does not match; None when it matches."""
        blame = self.blame()
        return None if blame is None else blame.line

    def blame(self) -> Blame | None:
        """Where the recorded stdout stops matching the expected body, and what it printed there; None when it matches.

        The whole output is searched, a window at a time, whatever its size.
        """
        body, tokens, stdout_file = self.expected_body, self.expected.fuzzy, self.test.stdout_path
        return blame_text("", body, tokens) if stdout_file is None else blame_file(stdout_file, body, tokens)


def recheck(recorded: RecordedGuide, test: BlockResult, step: Step, bodies_as_run: Sequence[str] = ()) -> Recheck:
    """Set `step`'s `#test-result` against `test`, its `#test` in the recorded guide.

    `bodies_as_run` are result bodies the run may have used (as written,
    placeholders in place), to read back values given with `--set`.
    ValueError when `step` has no `#test-result`: a caller's mistake.
    """
    if step.expected is None:
        raise ValueError(f"{step.file}:{step.line}: a #test without a #test-result has nothing to re-check")
    loads = [(load.name, load.placeholder) for load in step.expected.loads]
    values, missing = resolve_loads(recorded, test, loads, bodies_as_run)
    return Recheck(
        test=test,
        expected=step.expected,
        command_changed=step.code_sha256 != test.step.code_sha256,
        values=values,
        missing=tuple(missing),
    )


def misread_by(read_as: str, plan: Plan, recorded: RecordedGuide) -> str | None:
    """How the guide, planned as PLAN (read as READ_AS, a dialect), is not the one RECORDED shows the run read: what
    the run had that it has not; None when it may be.

    Every #test has an id: a mismatch without one was read in a plain dialect.
    """
    if not plan.steps and recorded.blocks:
        return f"the guide has no block to run, but {plural(len(recorded.blocks), 'block')} of it ran"
    if read_as == "labels" and any(b.status is Status.MISMATCH and b.step.id is None for b in recorded.blocks):
        return "the guide is read as labelled blocks, but a block without an id mismatched"
    return None
