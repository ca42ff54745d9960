"""A guide as the maintenance tools read it: planned without running, every name a block loads taken as given."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ci.base import frozen
from ci.guide.dialects import chosen_dialect, guide_lines, plan_guide
from ci.guide.dialects.fences import has_fences
from ci.guide.dialects.pycon import has_console
from ci.guide.model import DocumentError, Plan, TimeoutRule
from ci.guide.parse import ParsedGuide, parse_guide
from ci.guide.plan import block_loads, build_plan

__all__ = [
    "LABELS",
    "Reading",
    "dialect_of",
    "loaded_names",
    "plan_without_running",
    "reading_for",
    "runs_something",
]


@frozen
class Reading:
    """How a tool reads one guide: the --dialect and --timeout-rule ci.run would be given for it."""

    dialect: str = "labels"  # labels, fences, pycon or auto; the guide's own front matter ci.dialect still wins
    timeout_rules: tuple[TimeoutRule, ...] = ()  # the plain dialects' limits by command kind (a registry entry's)


LABELS = Reading()  # the label contract, as ci.run reads a guide by default


def reading_for(path: str, asked: str | None, registered: Mapping[str, Reading]) -> Reading:
    """How the guide at PATH is read: as --dialect ASKED when given, else as its registry entry says, else as the
    label contract (in every case its front matter's ci.dialect wins, as in ci.run)."""
    entry = registered.get(os.path.realpath(path))
    if asked is not None:
        return Reading(asked, entry.timeout_rules if entry else ())
    return entry or LABELS


def runs_something(text: str, name: str, dialect: str) -> bool:
    """Whether the text, read in DIALECT (its front matter's ci.dialect wins), has a block to run: a labelled block
    (or one whose label is a near miss, an error) for the label contract, a ```shell fence for fences, a ```pycon fence for pycon. A text whose dialect `auto`
    cannot choose (both kinds of fence) counts: what is wrong with it is the contract check's to say."""
    parsed = parse_guide(text, name)
    lines = guide_lines(text)
    try:
        chosen = chosen_dialect(parsed, lines, dialect)
    except DocumentError:
        return True
    if chosen == "labels":  # a fence whose label is a near miss (`#tset`, `bash#test-setup`) is a guide's mistake
        return bool(parsed.blocks) or any(near.error for near in parsed.near_labels)
    return has_fences(lines) if chosen == "fences" else has_console(lines)


def loaded_names(parsed: ParsedGuide) -> set[str]:
    """Every NAME a block of the guide loads: planning with them preset accepts values given by --set."""
    return {load.name for block in parsed.blocks for load in block_loads(block)}


def dialect_of(text: str, name: str, asked: str) -> str:
    """The dialect the guide is read in when ASKED is ci.run's --dialect (chosen_dialect); DocumentError as there."""
    return chosen_dialect(parse_guide(text, name), guide_lines(text), asked)


def plan_without_running(
    text: str,
    name: str,
    *,
    source_path: str | None = None,
    dialect: str = "labels",
    timeout_rules: Sequence[TimeoutRule] = (),
) -> Plan:
    """The guide's plan when no block runs to store what others load; DocumentError as build_plan raises it.

    DIALECT and TIMEOUT_RULES as ci.run takes them (a registry entry's); `<UPSTREAM_REF>` counts as given.
    """
    parsed = parse_guide(text, name)
    if chosen_dialect(parsed, guide_lines(text), dialect) == "labels":
        return build_plan(parsed, preset_names=loaded_names(parsed), source_path=source_path)
    preset = {*loaded_names(parsed), "UPSTREAM_REF"}
    return plan_guide(
        text, name, dialect=dialect, preset_names=preset, timeout_rules=timeout_rules, source_path=source_path
    )
