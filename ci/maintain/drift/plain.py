"""Checks 1 and 3 for a guide read in a plain dialect (fences, pycon): its document errors, and its steps diffed.

The label contract names its blocks by id or store, so its diff pairs blocks by name (changes.py). A plain
dialect's steps have no names: the plain-fence dialect's steps are its ```shell fences, the Python-console
dialect's are its `>>> ` statements, and the steps of the base revision and of now are paired by aligning the
two sequences, so that a step inserted is one step added, not every later one changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from ci.base import frozen
from ci.guide.dialects import guide_lines, plan_guide
from ci.guide.dialects.fences import UPSTREAM_REF
from ci.guide.dialects.pycon import readable_statements
from ci.guide.model import DocumentError, Plan, TimeoutRule
from ci.maintain.drift.findings import BlockChange, Finding, document_error_findings, warning_findings

__all__ = ["plain_contract_findings", "plain_step_changes"]


def plain_contract_findings(
    text: str, file: str, dialect: str, timeout_rules: Sequence[TimeoutRule]
) -> tuple[Plan | None, list[Finding]]:
    """The plan of the guide read in DIALECT (`<UPSTREAM_REF>` taken as given, as CI gives it), and every document
    error and warning, as `ci.run --dialect DIALECT --list` would report them."""
    try:
        plan = plan_guide(
            text, file, dialect=dialect, preset_names={UPSTREAM_REF}, timeout_rules=timeout_rules, source_path=file
        )
    except DocumentError as error:
        return None, document_error_findings(file, error) + warning_findings(file, error.warnings)
    return plan, warning_findings(file, plan.warnings)


@frozen
class _Step:
    """A step of a plain dialect, in the terms the diff compares."""

    name: str  # how the change names it (its line is told apart): "shell fence", "pycon statement"
    line: int
    command: str  # the fence's body, or the statement without its prompts
    expected: str | None  # the expected output as written; None when there is none
    skipped: bool  # ```shell skip


def _steps(plan: Plan | None, text: str, dialect: str) -> list[_Step]:
    """The steps of PLAN (read from TEXT in DIALECT); none when the text did not plan."""
    if plan is None:
        return []
    if dialect != "pycon":
        return [
            _Step(
                f"{step.language_word}{' skip' if step.skip_reason else ''} fence",
                step.line,
                step.body,
                step.expected.body if step.expected else None,
                step.skip_reason is not None,
            )
            for step in plan.steps
        ]
    return [
        _Step(
            "pycon statement",
            each.line,
            each.source,
            "\n".join(each.output) if each.output else None,
            False,
        )
        for each in readable_statements(guide_lines(text), plan.guide)
    ]


def _what_changed(old: _Step, new: _Step) -> tuple[str, ...]:
    what = [
        word
        for word, changed in (
            ("command", old.command != new.command),
            ("expected output", old.expected != new.expected),
            ("skip", old.skipped != new.skipped),
        )
        if changed
    ]
    return tuple(what)


def plain_step_changes(
    old_text: str | None, text: str, plan: Plan | None, file: str, dialect: str, timeout_rules: Sequence[TimeoutRule]
) -> list[BlockChange]:
    """Steps added, removed or changed from OLD_TEXT (None: the guide is new; a text that does not plan counts as
    one without steps) to TEXT, whose plan is PLAN, both read in DIALECT (fences or pycon, as chosen)."""
    old_plan = None
    if old_text is not None:
        old_plan, _ = plain_contract_findings(old_text, file, dialect, timeout_rules)
    before, after = _steps(old_plan, old_text or "", dialect), _steps(plan, text, dialect)
    # aligned on the commands: a step whose command stayed is the same step, whatever else of it changed
    matcher = difflib.SequenceMatcher(None, [s.command for s in before], [s.command for s in after], autojunk=False)
    changes: list[BlockChange] = []
    for _, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        paired = min(old_end - old_start, new_end - new_start)
        for offset in range(paired):
            old, new = before[old_start + offset], after[new_start + offset]
            if what := _what_changed(old, new):
                changes.append(BlockChange(file, new.name, new.line, "changed", what))
        for new in after[new_start + paired : new_end]:
            changes.append(BlockChange(file, new.name, new.line, "added"))
        for old in before[old_start + paired : old_end]:
            changes.append(BlockChange(file, old.name, old.line, "removed"))
    return changes
