"""Selection: which steps of the plans run (`--only`, `--from`, `--until`), and what a selection leaves unstored."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

from ci.base import frozen
from ci.guide.model import DocumentError, Plan, Problem, Step, closest

__all__ = ["only_idents", "select_steps"]


@frozen
class _Chosen:
    """What the selection options pick in one plan."""

    wanted: set[int] | None  # the ordinals --only names; None without --only
    first: int | None  # the first ordinal --from lets run (0 without --from; None: --from names none here)
    last: int | None  # the last ordinal --until lets run (the plan's last without --until; None: none here)


def _hits(plan: Plan, ident: str) -> list[int]:
    return [s.ordinal for s in plan.steps if ident in (s.id, s.store, str(s.ordinal))]


def select_steps(
    plans: Sequence[Plan],
    *,
    only: Sequence[str] = (),
    start: str | None = None,
    until: str | None = None,
    preset_names: Iterable[str] = (),
) -> list[dict[int, str]]:
    """Decide which steps of each plan run.

    Returns, per plan, the ordinals left out with the reason. An ID is an id, a
    store name or an ordinal; one that names no block of any plan is a
    DocumentError, and so is a selection that leaves a selected block without a
    value it loads: its setup is left out and `--set` (PRESET_NAMES) does not give it.
    """
    _check_idents(plans, only, start, until)
    left_out: list[dict[int, str]] = []
    chosen: list[_Chosen] = []
    for plan in plans:
        picked = _Chosen(
            wanted={o for ident in only for o in _hits(plan, ident)} if only else None,
            first=min(_hits(plan, start), default=None) if start else 0,
            last=max(_hits(plan, until), default=None) if until else len(plan.steps),
        )
        reasons = {step.ordinal: _reason(picked, step, start, until) for step in plan.steps}
        chosen.append(picked)
        left_out.append({ordinal: reason for ordinal, reason in reasons.items() if reason})
    if all(len(reasons) == len(plan.steps) for plan, reasons in zip(plans, left_out, strict=True)):
        flags = " ".join(
            f"{flag} {value}"
            for flag, value in (("--only", ",".join(only)), ("--from", start), ("--until", until))
            if value
        )
        message = f"{flags} selects no block to run; see --list for the blocks in their order"
        raise DocumentError([Problem("command line", 0, message)])
    preset = set(preset_names)
    problems = [
        problem
        for plan, picked, reasons in zip(plans, chosen, left_out, strict=True)
        for problem in _values_left_unstored(plans, plan, picked, reasons, preset, start)
    ]
    if problems:
        raise DocumentError(problems)
    return left_out


def _check_idents(plans: Sequence[Plan], only: Sequence[str], start: str | None, until: str | None) -> None:
    """A DocumentError for each ID that names no block of any plan, with the closest name when one is close."""
    names = {name for plan in plans for step in plan.steps for name in (step.id, step.store) if name}
    problems = []
    for flag, idents in (("--only", only), ("--from", [start] if start else []), ("--until", [until] if until else [])):
        for ident in idents:
            if any(_hits(plan, ident) for plan in plans):
                continue
            meant = closest(ident, names)
            guess = f"did you mean {flag} {meant}? " if meant else ""
            message = f"{flag} {ident!r} names no block; {guess}use an id, a store name or an ordinal (see --list)"
            problems.append(Problem("command line", 0, message))
    if problems:
        raise DocumentError(problems)


def _reason(chosen: _Chosen, step: Step, start: str | None, until: str | None) -> str:
    """Why the step is left out ("" when it runs)."""
    if chosen.wanted is not None and step.ordinal not in chosen.wanted:
        return "not selected by --only"
    if chosen.first is None or step.ordinal < chosen.first:
        return f"before --from {start}"
    if chosen.last is None or step.ordinal > chosen.last:
        return f"after --until {until}"
    return ""


def _storing_setup(plan: Plan, before: Step, name: str, runs: set[int]) -> Step | None:
    """The setup that would store NAME for BEFORE, when the selection leaves every setup storing it out; else None."""
    setups = [s for s in plan.steps if s.ordinal < before.ordinal and s.store == name]
    if not setups or any(s.ordinal in runs for s in setups):
        return None
    return setups[-1]


def _values_left_unstored(
    plans: Sequence[Plan], plan: Plan, chosen: _Chosen, left_out: dict[int, str], preset: set[str], start: str | None
) -> list[Problem]:
    """A problem for each value a selected block loads whose setup the selection leaves out."""
    runs = {step.ordinal for step in plan.steps if step.ordinal not in left_out}
    problems = []
    for step in plan.steps:
        if step.ordinal not in runs or step.skip_reason is not None:
            continue
        loads = [*step.loads, *(step.expected.loads if step.expected else ())]
        for name in dict.fromkeys(load.name for load in loads if load.name not in preset):
            setup = _storing_setup(plan, step, name, runs)
            if setup is None:
                continue
            needed = _setups_needed(plan, setup, runs, preset)
            message = (
                f"{_named(step)} loads {name!r}, which {_named(setup)} at {setup.file}:{setup.line} stores, "
                f"but {_left_out_by(chosen, setup, start)}: pass --set {name}=VALUE, "
                f"or {_fix(plans, chosen, needed)}"
            )
            problems.append(Problem(step.file, step.line, message))
    return problems


def _setups_needed(plan: Plan, setup: Step, runs: set[int], preset: set[str]) -> list[Step]:
    """SETUP and every left-out setup it needs in turn to store what it loads, in plan order."""
    needed = {setup.ordinal: setup}
    pending = [setup]
    while pending:
        current = pending.pop()
        for load in current.loads:
            earlier = _storing_setup(plan, current, load.name, runs | set(needed))
            if load.name not in preset and earlier is not None:
                needed[earlier.ordinal] = earlier
                pending.append(earlier)
    return [needed[ordinal] for ordinal in sorted(needed)]


def _named(step: Step) -> str:
    """`#test id=use`, `#test-setup store=path`, else `#test-setup #3`."""
    return f"{step.label.value} {(step.named_by or (f'#{step.ordinal}',))[0]}"


def _left_out_by(chosen: _Chosen, setup: Step, start: str | None) -> str:
    """Which options leave the setup out: `--only`, `--from X`, or both."""
    reasons = ["--only leaves it out"] if _off_only(chosen, [setup]) else []
    if _before_start(chosen, [setup]):
        reasons.append(f"--from {start} starts after it")
    return " and ".join(reasons)


def _off_only(chosen: _Chosen, needed: list[Step]) -> list[Step]:
    """The needed setups --only does not select."""
    return [s for s in needed if chosen.wanted is not None and s.ordinal not in chosen.wanted]


def _before_start(chosen: _Chosen, needed: list[Step]) -> bool:
    return any(chosen.first is None or s.ordinal < chosen.first for s in needed)


def _fix(plans: Sequence[Plan], chosen: _Chosen, needed: list[Step]) -> str:
    """The options to add so that the needed setups run: `--only ID ...`, `--from ID`, or both."""
    options = " ".join(f"--only {shlex.quote(_ident(plans, s))}" for s in _off_only(chosen, needed))
    if not _before_start(chosen, needed):
        return f"add {options} to run it{'' if len(needed) == 1 else ' and the setups it needs'} too"
    start_at = f"--from {shlex.quote(_ident(plans, needed[0]))}"
    return f"add {options} and start there: {start_at}" if options else f"start there: {start_at}"


def _ident(plans: Sequence[Plan], step: Step) -> str:
    """The name that selects STEP alone in every plan given: its id, else its store, else its ordinal."""
    for name in (step.id, step.store):
        if name and sum(len(_hits(plan, name)) for plan in plans) == 1:
            return name
    return str(step.ordinal)


def only_idents(values: Sequence[str], plans: Sequence[Plan]) -> list[str]:
    """The names the `--only` values give: a value that names a block whole is that name, any other is split at commas.

    So `--only a,b` still selects a and b, and an id that holds a comma is selected by giving it alone.
    """
    names = {name for plan in plans for step in plan.steps for name in (step.id, step.store, str(step.ordinal))}
    idents: list[str] = []
    for value in values:
        parts = [value] if value in names else [part.strip() for part in value.split(",")]
        idents.extend(part for part in parts if part)
    return idents
