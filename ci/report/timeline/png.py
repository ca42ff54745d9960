"""The timeline as a PNG, drawn with matplotlib (the optional `timeline` extra) for runs outside GitHub.

Three panels share one row per block: its bar on the run's clock coloured by status, its peak RSS
and its CPU seconds. The rows are computed apart from the drawing (`chart_rows`), so what is drawn
can be checked without matplotlib. Guides of one run follow each other on the clock, each one
starting where the one before it ended.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ci.base import frozen
from ci.base.files import write_atomically
from ci.base.text import clean_text
from ci.guide.model import Status
from ci.report.timeline import STATUS_COLOURS, Timeline, chosen_bars

__all__ = ["EXTRA", "MAX_PNG_BARS", "ChartRow", "MissingExtra", "chart_rows", "draw_png"]

EXTRA = "pip install 'guide-guard[timeline]'"  # what brings matplotlib
MAX_PNG_BARS = 300  # per guide: beyond it, every failing block and the longest others
_MIB = 1024 * 1024


class MissingExtra(Exception):
    """matplotlib cannot be imported: the message says which extra to install."""


@frozen
class ChartRow:
    """One block's row of the PNG, top to bottom in run order."""

    label: str  # `N. #label name`, with `GUIDE: ` before it when the run had several guides
    start_s: float  # on the run's clock: the guide's offset plus the block's start
    duration_s: float
    colour: str
    status: Status
    peak_rss_mib: float | None
    cpu_s: float | None


def chart_rows(timelines: Sequence[Timeline], *, limit: int = MAX_PNG_BARS) -> list[ChartRow]:
    """The rows the PNG draws: one per block that started (at most `limit` per guide), in run order."""
    rows: list[ChartRow] = []
    offset = 0.0
    for timeline in timelines:
        prefix = f"{Path(timeline.guide).name}: " if len(timelines) > 1 else ""
        for bar in chosen_bars(timeline, limit):
            rows.append(
                ChartRow(
                    label=_plain(f"{prefix}{bar.ordinal}. {bar.label} {bar.name}"),
                    start_s=offset + bar.start_s,
                    duration_s=bar.duration_s,
                    colour=bar.colour,
                    status=bar.status,
                    peak_rss_mib=bar.peak_rss_bytes / _MIB if bar.peak_rss_bytes is not None else None,
                    cpu_s=bar.cpu_s,
                )
            )
        offset += timeline.end_s
    return rows


def _plain(text: str) -> str:
    """TEXT as matplotlib shows it as written (cleaned as in every report; a `$` would start math notation)."""
    return clean_text(text).replace("$", r"\$")


def _figure_class() -> Any:
    """matplotlib's Figure on the Agg canvas (no display needed); MissingExtra without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtra(f"drawing a timeline needs matplotlib ({exc}): {EXTRA}") from None

    def figure(**options: Any) -> Any:
        drawn = Figure(**options)
        FigureCanvasAgg(drawn)
        return drawn

    return figure


def _title(timelines: Sequence[Timeline], shown: int) -> str:
    total = sum(len(t.bars) for t in timelines)
    title = _plain(", ".join(Path(t.guide).name for t in timelines))
    if shown < total:
        title += f" ({shown} of {total} blocks: every failing one, then the longest)"
    never: dict[Status, int] = {}
    for timeline in timelines:
        for status, count in timeline.not_drawn:
            never[status] = never.get(status, 0) + count
    if never:
        counts = ", ".join(f"{never[status]} {status.value}" for status in Status if status in never)
        title += f"\nnot drawn (never started): {counts}"
    if any(t.estimated for t in timelines):
        title += "\nstarts estimated from the durations (a results.json older than version 3)"
    return title


def draw_png(timelines: Sequence[Timeline], path: Path, *, dpi: int = 100) -> int:
    """Draw the run's timeline into PATH (written whole or not at all); the number of blocks drawn."""
    figure_of = _figure_class()
    rows = chart_rows(timelines)
    height = 1.6 + 0.28 * max(len(rows), 1)
    figure = figure_of(figsize=(12, height), dpi=dpi, layout="constrained")
    clock, memory, cpu = figure.subplots(1, 3, sharey=True, gridspec_kw={"width_ratios": [4, 1, 1]})
    positions = list(range(len(rows)))
    end = max((row.start_s + row.duration_s for row in rows), default=1.0) or 1.0
    # a block of a few milliseconds in an hour's run is still seen
    widths = [max(row.duration_s, end / 400) for row in rows]
    colours = [row.colour for row in rows]
    clock.barh(positions, widths, left=[row.start_s for row in rows], color=colours, height=0.7)
    clock.set_yticks(positions, labels=[row.label for row in rows], fontsize=8)
    clock.invert_yaxis()  # the first block at the top
    clock.set_xlabel("seconds since the run started")
    clock.grid(axis="x", alpha=0.3)
    clock.set_xlim(left=0)
    _measure(memory, positions, [row.peak_rss_mib for row in rows], colours, "peak RSS (MiB)")
    _measure(cpu, positions, [row.cpu_s for row in rows], colours, "CPU (s)")
    drawn = {row.status for row in rows}
    handles = [_patch(STATUS_COLOURS[s], s.value) for s in Status if s in drawn]
    if handles:
        figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    figure.suptitle(_title(timelines, len(rows)), fontsize=10)
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=dpi)
    write_atomically(path, image.getvalue())
    return len(rows)


def _measure(axes: Any, positions: list[int], values: list[float | None], colours: list[str], name: str) -> None:
    """A panel of one measure per block; a block with none (ended before the first sample) has no bar."""
    axes.barh(positions, [value or 0.0 for value in values], color=colours, height=0.7)
    axes.set_xlabel(name)
    axes.set_xlim(left=0)
    if all(value is None for value in values):
        axes.text(0.5, 0.5, "not sampled", transform=axes.transAxes, ha="center", va="center", color="grey")


def _patch(colour: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(color=colour, label=label)
