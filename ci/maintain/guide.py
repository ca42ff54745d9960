"""A guide as the maintenance tools read it: planned without running, every name a block loads taken as given."""

from __future__ import annotations

from collections.abc import Sequence

from ci.core.dialects import chosen_dialect, guide_lines, plan_guide
from ci.core.model import Plan, TimeoutRule
from ci.core.parse import ParsedGuide, parse_guide
from ci.core.plan import block_loads, build_plan

__all__ = ["dialect_of", "loaded_names", "plan_without_running"]


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
