"""Dialects: how a guide's text becomes a plan (the label contract, plain fences, a Python console session).

Every dialect yields the same Plan and Step records; what differs between them
reaches the runner only through those records (a searched expected output,
merged streams, a limit by command kind).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ci.core.dialects.fences import UPSTREAM_REF, has_fences, plan_fences
from ci.core.dialects.pycon import has_console, plan_console
from ci.core.model import DocumentError, Plan, Problem, TimeoutRule
from ci.core.parse import ParsedGuide, parse_guide
from ci.core.plan import DEFAULT_TIMEOUT_S, build_plan
from ci.core.settings import guide_settings

__all__ = ["chosen_dialect", "guide_lines", "plan_guide"]

# The line breaks markdown-it counts lines by (ci.core.parse): a guide saved with CRLF has no CR in its commands
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

_FIX = (
    "label its blocks (```shell #test-setup, see docs/authoring.md), or name the dialect with --dialect fences"
    " (```shell fences) or --dialect pycon (a ```pycon fence)"
)


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
    found = [name for name, present in (("fences", has_fences(lines)), ("pycon", has_console(lines))) if present]
    if len(found) == 1:
        return found[0]
    if found:
        message = (
            f"both ```shell and ```pycon fences and no label: say which to run with --dialect {' or '.join(found)}"
        )
        raise DocumentError([Problem(parsed.file, 0, message)])
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
) -> Plan:
    """The plan of a guide read in DIALECT (see chosen_dialect); DocumentError listing what is wrong.

    A block's limit in the plain dialects: the front matter's ci.timeout_rules,
    then TIMEOUT_RULES (the command line's, from the registry), the first whose
    text the command holds; else ci.timeout, else DEFAULT_TIMEOUT_S.
    """
    parsed = parse_guide(text, name)
    lines = guide_lines(text)
    chosen = chosen_dialect(parsed, lines, dialect)
    if chosen == "labels":
        return build_plan(
            parsed, preset_names=preset_names, default_timeout_s=default_timeout_s, source_path=source_path
        )
    settings, problems = guide_settings(parsed)
    if problems:
        raise DocumentError(problems)
    default_s = settings.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S
    rules = (*settings.timeout_rules, *timeout_rules)
    if chosen == "fences":
        preset_names = tuple(preset_names)
        if upstream_ref and UPSTREAM_REF not in preset_names and "\n" not in upstream_ref:
            # the upstream commit under test, as CI passes it ($UPSTREAM_REF): put in the text, as the reference does
            lines = [line.replace(f"<{UPSTREAM_REF}>", upstream_ref) for line in lines]
        return plan_fences(
            lines,
            name,
            settings,
            preset_names=preset_names,
            default_s=default_s,
            rules=rules,
            source_path=source_path,
        )
    return plan_console(lines, name, settings, default_s=default_s, rules=rules, source_path=source_path)
