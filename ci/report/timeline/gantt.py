"""The timeline as a Mermaid `gantt` chart, which GitHub draws in a step summary.

Mermaid reads a task line up to its first `:`, and `#`, `;` and `%%` start comments or end a
statement there, so a bar's text keeps only letters, digits and a few plain signs: anything else
becomes `_`. Each bar's text starts with the block's ordinal, so no block name can read as a keyword
(`section`, `click`, `title`, ...). Times are written as dates on 2000-01-01 plus the offset since the
guide started, to the millisecond, and drawn in the same local time they are read in: the axis shows
the time since the guide started.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ci.guide.model import Status
from ci.report.timeline import Bar, Timeline, chosen_bars

__all__ = ["MAX_GANTT_BARS", "bar_text", "gantt_chart"]

MAX_GANTT_BARS = 100  # per guide: a step summary holds 1 MiB at most, and a chart of hundreds of bars is unreadable
MAX_NAME_CHARS = 60
_PLAIN = frozenset(" _-.+/()=@!?~")
_ORIGIN = datetime(2000, 1, 1)  # no daylight saving change on that day in any zone
# done is drawn green rather than the theme's grey; crit stays the theme's red
_INIT = '%%{init: {"themeVariables": {"doneTaskBkgColor": "#2da44e", "doneTaskBorderColor": "#1a7f37"}}}%%'


def _tag(status: Status) -> str:
    """The task tag that colours a bar: done for passed, crit for any failure."""
    return "crit" if status.is_failure else "done"


def bar_text(bar: Bar) -> str:
    """The bar's text as Mermaid reads it whatever the block's name: `ORDINAL. LABEL NAME`, plain signs only."""
    name = "".join(c if c.isalnum() or c in _PLAIN else "_" for c in bar.name)
    name = " ".join(name.split())
    if len(name) > MAX_NAME_CHARS:
        name = name[: MAX_NAME_CHARS - 3] + "..."
    return f"{bar.ordinal}. {bar.label.lstrip('#')} {name}".rstrip()


def _when(milliseconds: int) -> str:
    moment = _ORIGIN + timedelta(milliseconds=milliseconds)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


def _task(bar: Bar) -> str:
    start = round(bar.start_s * 1000)
    end = max(start + 1, round(bar.end_s * 1000))  # a block of under a millisecond still gets a bar
    return f"    {bar_text(bar)} :{_tag(bar.status)}, {_when(start)}, {_when(end)}"


def _legend(timeline: Timeline, shown: int) -> str:
    parts = ["Timeline from the guide's start: green (done) passed; red (crit) failed, mismatch, timed_out or error."]
    if shown < len(timeline.bars):
        parts.append(
            f"Shown: {shown} of {len(timeline.bars)} blocks that ran, every failing one first, then the longest;"
            " the table lists them all."
        )
    if timeline.not_drawn:
        counts = ", ".join(f"{count} {status.value}" for status, count in timeline.not_drawn)
        parts.append(f"Not drawn (never started): {counts}.")
    return " ".join(parts)


def gantt_chart(timeline: Timeline, *, limit: int = MAX_GANTT_BARS) -> str:
    """A Markdown ```mermaid block of the guide's timeline and a legend line under it; "" when no block ran.

    Only block names, statuses and times go in: never a block's output.
    """
    bars = chosen_bars(timeline, limit)
    if not bars:
        return ""
    axis = "%H:%M:%S" if timeline.end_s >= 60 else "%M:%S.%L"
    lines = [
        "```mermaid",
        _INIT,
        "gantt",
        "    dateFormat YYYY-MM-DD HH:mm:ss.SSS",
        f"    axisFormat {axis}",
        "    todayMarker off",
        "    section blocks",
        *(_task(bar) for bar in bars),
        "```",
        "",
        _legend(timeline, len(bars)),
    ]
    return "\n".join(lines) + "\n"
