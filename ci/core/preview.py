"""A plan's commands as its run will give them, as far as that is known before the run starts (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ci.core.model import Plan, Step
from ci.core.placeholders import substitute

__all__ = ["PreviewedCommand", "previewed_commands"]


@dataclass(frozen=True)
class PreviewedCommand:
    """One block's command: its body with the values a run will load into it that are known beforehand."""

    text: str  # the body with each `<PH>` whose value `--set` gives substituted; any other `<PH>` left as written
    # one note per `<PH>` left as written, saying where its value comes from:
    # `<DIR>: stored by #test-setup store=where at line 3 at run time`
    pending: tuple[str, ...]


def previewed_commands(
    plan: Plan, left_out: Mapping[int, str], preset: Mapping[str, str]
) -> dict[int, PreviewedCommand]:
    """Each step's command by ordinal, its loads substituted as the run would substitute them when it is known now.

    A value a setup stores is known only at run time, when that setup runs: a setup the selection leaves out
    (LEFT_OUT) or that is skipped stores nothing, and a `--set` value (PRESET) holds until a setup that runs
    stores the same name.
    """
    stored_by: dict[str, Step] = {}  # name -> the last setup so far that will store it at run time
    commands = {}
    for step in plan.steps:
        known, pending = [], []
        for load in step.loads:
            setup = stored_by.get(load.name)
            if setup is not None:
                pending.append(f"<{load.placeholder}>: stored by {_named(setup)} at line {setup.line} at run time")
            elif load.name in preset:
                known.append((load.placeholder, preset[load.name]))
            else:
                pending.append(f"<{load.placeholder}>: no value: no block that runs before it stores {load.name}")
        commands[step.ordinal] = PreviewedCommand(substitute(step.body, tuple(known)), tuple(dict.fromkeys(pending)))
        if step.store is not None and step.ordinal not in left_out and step.skip_reason is None:
            stored_by[step.store] = step
    return commands


def _named(step: Step) -> str:
    """`#test-setup store=where`, else `#test-setup #3`."""
    return f"{step.label.value} {(step.named_by or (f'#{step.ordinal}',))[0]}"
