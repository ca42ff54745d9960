"""The status board: one row per guide, failing guides first, as Markdown for the step summary, and its files.

Each row is the guide's newest run; a night the monitor skipped the guide (`not_run`) keeps the row of the
run before, from the previous board. `last_passed` carries over from the previous board until a run passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from ci.base.files import write_atomically
from ci.github.registry.model import Registry
from ci.github.registry.status import BADGE_SUFFIX, GuideStatus, badge

__all__ = ["BOARD_FILE", "board_markdown", "board_rows", "write_board"]

BOARD_FILE = "board.md"
_ORDER = {"failed": 0, "interrupted": 0, "no_verdict": 1, "not_run": 2, "passed": 3}  # failing first
_ICONS = {"passed": "✅", "failed": "❌", "interrupted": "⚠️", "no_verdict": "❌", "not_run": "⏸️"}


def _newest(statuses: Iterable[GuideStatus]) -> dict[str, GuideStatus]:
    """The newest status of each name (by date; the later one given wins a tie)."""
    found: dict[str, GuideStatus] = {}
    for status in statuses:
        kept = found.get(status.name)
        if kept is None or (status.date or "") >= (kept.date or ""):
            found[status.name] = status
    return found


def _row(current: GuideStatus | None, previous: GuideStatus | None, name: str, guide: str) -> GuideStatus:
    chosen = current
    if previous is not None and (current is None or current.verdict == "not_run"):
        chosen = previous  # not run tonight: its last run still stands
    if chosen is None:
        return GuideStatus(name=name, guide=guide, verdict="not_run")
    if chosen.verdict == "passed":
        return replace(chosen, last_passed=chosen.date)
    carried = chosen.last_passed or (previous.last_passed if previous is not None else None)
    return replace(chosen, last_passed=carried)


def board_rows(
    current: Sequence[GuideStatus], previous: Sequence[GuideStatus], registry: Registry | None
) -> list[GuideStatus]:
    """One row per guide: the registry's entries when given (a guide not run yet is `not_run`) and every guide
    of CURRENT, else every guide of CURRENT or PREVIOUS (a guide only the previous board has is one the registry
    no longer lists); failing guides first, then by name."""
    now, before = _newest(current), _newest(previous)
    if registry is not None:
        names = [(entry.name, entry.guide) for entry in registry.entries]
        names += [(name, status.guide) for name, status in now.items() if registry.entry(name) is None]
    else:
        names = [(name, status.guide) for name, status in {**before, **now}.items()]
    rows = [_row(now.get(name), before.get(name), name, guide) for name, guide in names]
    return sorted(rows, key=lambda row: (_ORDER[row.verdict], row.name))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else (f"{minutes}m {secs:02d}s" if minutes else f"{secs}s")


def _day(date: str | None) -> str:
    return date[:10] if date else "—"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") if text else "—"


def _counts(status: GuideStatus) -> str:
    parts = [f"{number} {name.replace('_', ' ')}" for name, number in status.counts.items() if number]
    return f" ({', '.join(parts)})" if parts else ""


def board_markdown(rows: Sequence[GuideStatus]) -> str:
    """The board as Markdown: a headline of counts, then the table."""
    failing = sum(1 for row in rows if _ORDER[row.verdict] < 2)
    passing = sum(1 for row in rows if row.verdict == "passed")
    not_run = len(rows) - failing - passing
    headline = f"## Guides: {failing} failing, {passing} passing" + (f", {not_run} not run" if not_run else "")
    lines = [
        headline,
        "",
        "| guide | verdict | upstream ref | last passed | took | run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        run = f"[{_day(row.date)}]({row.run_url})" if row.run_url else _day(row.date)
        lines.append(
            f"| {_cell(row.name)} | {_ICONS[row.verdict]} {row.text}{_counts(row)} | {_cell(row.ref or '')}"
            f" | {_day(row.last_passed)} | {_duration(row.duration_s)} | {run} |"
        )
    return "\n".join(lines) + "\n"


def write_board(directory: Path, rows: Sequence[GuideStatus], markdown: str) -> list[Path]:
    """DIRECTORY/board.md, and per guide NAME.json (its status) and NAME.badge.json (Shields); each file whole."""
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / BOARD_FILE]
    write_atomically(written[0], markdown, updating=True)
    for row in rows:
        status_file, badge_file = directory / f"{row.name}.json", directory / f"{row.name}{BADGE_SUFFIX}"
        write_atomically(status_file, json.dumps(row.to_json(), indent=2, ensure_ascii=False) + "\n", updating=True)
        write_atomically(badge_file, json.dumps(badge(row), ensure_ascii=False) + "\n", updating=True)
        written += [status_file, badge_file]
    return written
