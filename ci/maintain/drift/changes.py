"""Check 3, the block diff: runnable blocks added, removed or changed against the base revision."""

from __future__ import annotations

from ci.base import frozen
from ci.guide.model import Block, Label
from ci.guide.parse import ParsedGuide
from ci.maintain.drift.findings import BlockChange, block_name, first_param

__all__ = ["block_changes", "changed_results"]


@frozen
class _Entry:
    """A runnable block and its expected output, in the terms the diff compares."""

    name: str
    line: int
    language: str
    body: str
    params: tuple[tuple[str, str], ...]  # sorted, without id
    hidden: bool
    result_body: str | None
    result_params: tuple[tuple[str, str], ...]


def _params(block: Block) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((p.key, p.value or "") for p in block.params if p.key != "id"))


def _entries(parsed: ParsedGuide) -> dict[tuple[str, ...], _Entry]:
    """Runnable blocks keyed by label and id, else store (nth of that store), else nth anonymous setup."""
    results: dict[str, Block] = {}
    for block in parsed.blocks:
        result_id = first_param(block, "id")
        if block.label is Label.RESULT and result_id is not None:
            results.setdefault(result_id, block)
    entries: dict[tuple[str, ...], _Entry] = {}
    counts: dict[tuple[str, ...], int] = {}
    for block in parsed.blocks:
        if block.label is Label.RESULT:
            continue
        block_id, store = first_param(block, "id"), first_param(block, "store")
        base: tuple[str, ...] = (
            (block.label.value, "id", block_id)
            if block_id
            else (block.label.value, "store", store)
            if store
            else (block.label.value, "anonymous")
        )
        counts[base] = counts.get(base, 0) + 1
        key = (*base, str(counts[base]))
        if block_id or store:
            name = block_name(block) + (f" (#{counts[base]})" if counts[base] > 1 else "")
        else:
            name = f"{block.label.value} #{counts[base]} without id or store"
        result = results.get(block_id) if block.label is Label.TEST and block_id else None
        entries[key] = _Entry(
            name=name,
            line=block.line,
            language=(block.language or "").lower(),
            body=block.body,
            params=_params(block),
            hidden=block.hidden,
            result_body=result.body if result else None,
            result_params=_params(result) if result else (),
        )
    return entries


def _what_changed(old: _Entry, new: _Entry) -> tuple[str, ...]:
    what = []
    if old.body != new.body:
        what.append("command")
    if (old.result_body, old.result_params) != (new.result_body, new.result_params):
        what.append("expected output")
    if old.params != new.params:
        what.append("parameters")
    if old.language != new.language:
        what.append("language")
    if old.hidden != new.hidden:
        what.append("hidden")
    return tuple(what)


def block_changes(old: ParsedGuide | None, new: ParsedGuide) -> list[BlockChange]:
    """Runnable blocks added, removed or changed from `old` (None: the guide is new) to `new`."""
    before = _entries(old) if old is not None else {}
    after = _entries(new)
    changes = []
    for key, entry in after.items():
        if key not in before:
            changes.append(BlockChange(new.file, entry.name, entry.line, "added"))
        elif what := _what_changed(before[key], entry):
            changes.append(BlockChange(new.file, entry.name, entry.line, "changed", what))
    for key, entry in before.items():
        if key not in after:
            changes.append(BlockChange(new.file, entry.name, entry.line, "removed"))
    return changes


def changed_results(old: ParsedGuide | None, new: ParsedGuide) -> dict[str, str | None]:
    """Ids of `#test`s whose expected output changed, with the old result body (None when it is new)."""
    before = _entries(old) if old is not None else {}
    changed: dict[str, str | None] = {}
    for key, entry in _entries(new).items():
        if key[0] != Label.TEST.value or key[1] != "id" or entry.result_body is None:
            continue
        previous = before.get(key)
        if previous is None or (previous.result_body, previous.result_params) != (
            entry.result_body,
            entry.result_params,
        ):
            changed[key[2]] = previous.result_body if previous else None
    return changed
