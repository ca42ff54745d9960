"""Dialects: how a guide's text becomes a plan (the label contract, plain fences, a Python console session).

Every dialect yields the same Plan and Step records; what differs between them
reaches the runner only through those records (a searched expected output,
merged streams, a limit by command kind).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from ci.guide.dialects.fences import RUN_LANGUAGE, UPSTREAM_REF, plan_fences
from ci.guide.dialects.fences_scan import scan_fences
from ci.guide.dialects.pycon import CONSOLE_LANGUAGE, plan_console
from ci.guide.model import DocumentError, GuideSettings, Plan, Problem, TimeoutRule
from ci.guide.parse import ParsedGuide, parse_guide
from ci.guide.plan import DEFAULT_TIMEOUT_S, build_plan
from ci.guide.settings import DEFAULT_RETRY_DELAY_S, guide_settings

__all__ = ["chosen_dialect", "guide_lines", "plan_guide"]

# The line breaks markdown-it counts lines by (ci.guide.parse): a guide saved with CRLF has no CR in its commands
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def guide_lines(text: str) -> list[str]:
    """TEXT's lines as the plain dialects read them, without their line breaks (LF, CRLF or CR), numbered as the
    label contract's parser numbers them."""
    return _LINE_BREAK.split(text)


def chosen_dialect(parsed: ParsedGuide, lines: Sequence[str], asked: str) -> str:
    """The dialect a guide is read in: the front matter's ci.dialect, else ASKED, and for `auto` the label contract
    when any label is there, else the one other dialect whose fences are; DocumentError when that is not one."""
    settings, _ = guide_settings(parsed)
    dialect = settings.dialect or asked
    if dialect != "auto":
        return dialect
    if parsed.blocks or parsed.near_labels or parsed.problems:
        return "labels"
    fences = scan_fences(lines)
    first = {
        dialect: next((fence.line for fence in fences if fence.language == language), None)
        for dialect, language in (("fences", RUN_LANGUAGE), ("pycon", CONSOLE_LANGUAGE))
    }
    found = [dialect for dialect, line in first.items() if line is not None]
    if len(found) == 1:
        return found[0]
    if found:
        shell, console = first["fences"], first["pycon"]
        assert shell is not None and console is not None
        message = (
            f"both ```{RUN_LANGUAGE} fences (the first at line {shell}) and ```{CONSOLE_LANGUAGE} fences (the first"
            f" at line {console}) and no label, so the dialect cannot be told: say which to run with --dialect"
            f" fences (every ```{RUN_LANGUAGE} fence) or --dialect pycon (the first ```{CONSOLE_LANGUAGE} session),"
            " or the registry entry's dialect, or the front matter's ci.dialect; or label the blocks to run"
        )
        raise DocumentError([Problem(parsed.file, min(shell, console), message)])
    return "labels"  # nothing to run in any dialect: the label contract's own error says how to label a block


def plan_guide(
    text: str,
    name: str,
    *,
    dialect: str = "labels",
    preset_names: Iterable[str] = (),
    default_timeout_s: float | None = None,
    timeout_rules: Sequence[TimeoutRule] = (),
    source_path: str | None = None,
    upstream_ref: str | None = None,
    upstream_variable: str = UPSTREAM_REF,
) -> Plan:
    """The plan of a guide read in DIALECT (see chosen_dialect); DocumentError listing what is wrong.

    A block's limit in the plain dialects: the front matter's ci.timeout_rules,
    then TIMEOUT_RULES (the command line's, from the registry), the first whose
    text the command holds; else ci.timeout, else DEFAULT_TIMEOUT_S.
    In a plain-fence guide, UPSTREAM_REF (the environment's UPSTREAM_VARIABLE, fences.upstream_ref) stands for
    `<UPSTREAM_REF>` unless PRESET_NAMES has it.
    """
    parsed = parse_guide(text, name)
    lines = guide_lines(text)
    chosen = chosen_dialect(parsed, lines, dialect)
    if chosen == "labels":
        ignored = _rules_ignored(name, timeout_rules)
        try:
            plan = build_plan(
                parsed, preset_names=preset_names, default_timeout_s=default_timeout_s, source_path=source_path
            )
        except DocumentError as error:
            raise DocumentError(error.problems, (*ignored, *error.warnings)) from None
        return dataclasses.replace(plan, warnings=(*ignored, *plan.warnings))
    settings, problems = guide_settings(parsed)
    if problems:
        raise DocumentError(problems)
    default_s = settings.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S
    rules = (*settings.timeout_rules, *timeout_rules)
    if chosen == "fences":
        plan = plan_fences(
            lines,
            name,
            settings,
            preset_names=preset_names,
            default_s=default_s,
            rules=rules,
            source_path=source_path,
            upstream_ref=upstream_ref,
            upstream_variable=upstream_variable,
        )
    else:
        plan = plan_console(lines, name, settings, default_s=default_s, rules=rules, source_path=source_path)
    return _retried(plan, settings)


def _rules_ignored(file: str, timeout_rules: Sequence[TimeoutRule]) -> tuple[Problem, ...]:
    """A warning when TIMEOUT_RULES (--timeout-rule, a registry entry's timeout_rules) are given for a guide read
    as labelled blocks, which they never reach: a warning, not an error, so that a run on scarce hardware is not
    refused for it (--strict refuses it; the registry's --check does)."""
    if not timeout_rules:
        return ()
    message = (
        "--timeout-rule (a registry entry's timeout_rules) sets limits by command kind for the plain dialects"
        " (fences, pycon), and this guide is read as labelled blocks, so the rules are ignored: read it with"
        " --dialect fences or pycon if it is written so, else drop the rules and give a block's limit with its"
        " label's timeout=, the front matter's ci.timeout or --timeout"
    )
    return (Problem(file, 0, message),)


def _retried(plan: Plan, settings: GuideSettings) -> Plan:
    """PLAN with the front matter's ci.retry and ci.retry_delay on every block that runs, as the label contract
    takes them for a block that says nothing of its own (a plain dialect's block never does)."""
    retry = settings.retry or 0
    delay_s = DEFAULT_RETRY_DELAY_S if settings.retry_delay_s is None else settings.retry_delay_s
    steps = tuple(
        step if step.skip_reason else dataclasses.replace(step, retry=retry, retry_delay_s=delay_s)
        for step in plan.steps
    )
    return dataclasses.replace(plan, steps=steps)
