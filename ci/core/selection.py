"""Selection: which steps of the plans run (`--only`, `--from`, `--until`)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.core.model import DocumentError, Plan, Problem
from ci.core.suggest import closest

__all__ = ["only_idents", "select_steps"]


def _hits(plan: Plan, ident: str) -> list[int]:
    return [s.ordinal for s in plan.steps if ident in (s.id, s.store, str(s.ordinal))]


def select_steps(
    plans: Sequence[Plan],
    *,
    only: Sequence[str] = (),
    start: str | None = None,
    until: str | None = None,
) -> list[dict[int, str]]:
    """Decide which steps of each plan run.

    Returns, per plan, the ordinals left out with the reason. An ID is an id, a
    store name or an ordinal; one that names no block of any plan is a
    DocumentError.
    """

    _check_idents(plans, only, start, until)
    left_out: list[dict[int, str]] = []
    for plan in plans:
        reasons: dict[int, str] = {}
        wanted = {o for ident in only for o in _hits(plan, ident)}
        first = min(_hits(plan, start), default=None) if start else None
        last = max(_hits(plan, until), default=None) if until else None
        for step in plan.steps:
            if only and step.ordinal not in wanted:
                reasons[step.ordinal] = "not selected by --only"
            elif start and (first is None or step.ordinal < first):
                reasons[step.ordinal] = f"before --from {start}"
            elif until and (last is None or step.ordinal > last):
                reasons[step.ordinal] = f"after --until {until}"
        left_out.append(reasons)
    if all(len(reasons) == len(plan.steps) for plan, reasons in zip(plans, left_out, strict=True)):
        flags = " ".join(
            f"{flag} {value}"
            for flag, value in (("--only", ",".join(only)), ("--from", start), ("--until", until))
            if value
        )
        message = f"{flags} selects no block to run; see --list for the blocks in their order"
        raise DocumentError([Problem("command line", 0, message)])
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
