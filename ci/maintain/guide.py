"""A guide as the maintenance tools read it: planned without running, every name a block loads taken as given."""

from __future__ import annotations

from ci.core.model import Plan
from ci.core.parse import ParsedGuide, parse_guide
from ci.core.plan import block_loads, build_plan

__all__ = ["loaded_names", "plan_without_running"]


def loaded_names(parsed: ParsedGuide) -> set[str]:
    """Every NAME a block of the guide loads: planning with them preset accepts values given by --set."""
    return {load.name for block in parsed.blocks for load in block_loads(block)}


def plan_without_running(text: str, name: str, *, source_path: str | None = None) -> Plan:
    """The guide's plan when no block runs to store what others load; DocumentError as build_plan raises it."""
    parsed = parse_guide(text, name)
    return build_plan(parsed, preset_names=loaded_names(parsed), source_path=source_path)
