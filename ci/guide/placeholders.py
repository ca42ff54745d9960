"""Placeholders: `<NAME>` in a block, replaced by the value a `load` names; one that no `load` replaces is warned of.

A forgotten `load` leaves `<NAME>` in the command as written (bash reads it as a redirection) or in the
expected output, and the run fails far from the cause. Planning warns of it, with the `load` to add.
Only `<NAME>` tokens whose NAME is, in any case, a stored name or a placeholder another block loads
are looked at, so a redirection (`< file`), a here-document or HTML in an expected output is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ci.guide.model import Load, Problem, Step

__all__ = ["placeholders_in", "substitute", "unloaded_placeholders", "written_line"]

_TOKEN = re.compile(r"<([^<>\s]+)>")


def unloaded_placeholders(steps: Sequence[Step], preset_names: Iterable[str]) -> list[Problem]:
    """A warning for each `<NAME>` a block (or its #test-result) holds for a value it does not load.

    NAME matches, case aside, a name stored by an earlier block or given with --set, or the placeholder
    another block loads such a value into; the warning names the `load="NAME>>PH"` to add.
    """
    loaded: dict[str, list[tuple[Load, int]]] = {}  # lower-cased placeholder -> the loads into it, with their lines
    for step in steps:
        for load, line in _loads(step):
            loaded.setdefault(load.placeholder.lower(), []).append((load, line))
    available = {name: f"--set gives {name}" for name in preset_names}  # name -> what stores it, so far
    by_lower = {name.lower(): name for name in available}
    warnings: list[Problem] = []
    for step in steps:
        bodies = [(step.body, step.line, step.loads)]
        if step.expected is not None:
            bodies.append((step.expected.body, step.expected.line, step.expected.loads))
        for body, fence_line, loads in bodies:
            own = {load.placeholder for load in loads}
            for placeholder, line in _placeholders(body, fence_line):
                found = None if placeholder in own else _value_for(placeholder, loaded, available, by_lower)
                if found is not None:
                    name, where = found
                    message = (  # `load="NAME>>PH"`, as the contract spells a load
                        f"<{placeholder}> is left as written: no load of this block replaces it, though {where}; "
                        f'add load="{name}>>{placeholder}" to its fence at line {fence_line}'
                    )
                    warnings.append(Problem(step.file, line, message))
        if step.store is not None:
            available[step.store] = f"{_named(step)} at line {step.line} stores {step.store}"
            by_lower[step.store.lower()] = step.store
    return warnings


def _loads(step: Step) -> list[tuple[Load, int]]:
    """The step's loads and its #test-result's, each with the line of its fence."""
    own = [(load, step.line) for load in step.loads]
    return own + [(load, step.expected.line) for load in step.expected.loads] if step.expected else own


def placeholders_in(body: str) -> list[str]:
    """The names of the `<NAME>` tokens in BODY, each once, in order."""
    return list(dict.fromkeys(token.group(1) for token in _TOKEN.finditer(body)))


def _placeholders(body: str, fence_line: int) -> list[tuple[str, int]]:
    """Each distinct `<TOKEN>` of the body, with the guide line it first appears on."""
    first: dict[str, int] = {}
    line, counted_to = fence_line + 1, 0
    for token in _TOKEN.finditer(body):
        line += body.count("\n", counted_to, token.start())
        counted_to = token.start()
        first.setdefault(token.group(1), line)
    return list(first.items())


def _value_for(
    placeholder: str, loaded: dict[str, list[tuple[Load, int]]], available: dict[str, str], by_lower: dict[str, str]
) -> tuple[str, str] | None:
    """The stored name a `<PLACEHOLDER>` stands for here, and why; None when it stands for none.

    Spelt exactly as another block's placeholder, then as a stored name; failing both, the same case aside.
    """
    into = [(load, line) for load, line in loaded.get(placeholder.lower(), []) if load.name in available]
    exact = next(((load, line) for load, line in into if load.placeholder == placeholder), None)
    if exact is None and placeholder not in available and into:
        exact = into[0]
    if exact is not None:
        load, line = exact
        return load.name, f"the block at line {line} loads {load.name} into <{load.placeholder}>"
    name = placeholder if placeholder in available else by_lower.get(placeholder.lower())
    return (name, available[name]) if name is not None else None


def _named(step: Step) -> str:
    """`#test-setup store=port`, `#test id=check`, else `#test-setup #3`."""
    return f"{step.label.value} {(step.named_by or (f'#{step.ordinal}',))[0]}"


def substitute(text: str, loads: tuple[tuple[str, str], ...]) -> str:
    """Replace every `<PH>` of TEXT by its value, in one pass over TEXT; loads are (placeholder, value) pairs.

    A value is pasted as it is: a `<PH>` inside a value is never expanded again, so the result does not
    depend on the order of the loads, and grows by the values' sizes only. Where two placeholders could
    start at the same `<`, the longer wins; a placeholder loaded twice takes its first load's value.
    """
    values: dict[str, str] = {}
    for placeholder, value in loads:
        values.setdefault(f"<{placeholder}>", value)
    if not values:
        return text
    found = re.compile("|".join(re.escape(token) for token in sorted(values, key=len, reverse=True)))
    return found.sub(lambda match: values[match.group()], text)


def written_line(text: str, loads: tuple[tuple[str, str], ...], line: int) -> int:
    """The line of TEXT (1-based) that line LINE of its substitution comes from: a value may span lines."""
    written = text.split("\n")
    reached = 0
    for number, each in enumerate(written, start=1):
        reached += substitute(each, loads).count("\n") + 1
        if line <= reached:
            return number
    return len(written)
