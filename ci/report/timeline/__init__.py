"""A run's timeline: one bar per block on the guide's clock, coloured by status (the step summary's chart, the PNG).

The layout is computed here, apart from any drawing, from a finished run (its outcomes) or from a
results.json read back; `ci.report.timeline.gantt` writes it as a Mermaid chart, and
`python -m ci.report.timeline` draws it with matplotlib.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ci.base import frozen
from ci.guide.model import Status
from ci.record import RecordedGuide
from ci.record.outcome import BlockResult

__all__ = [
    "NEVER_STARTED",
    "STATUS_COLOURS",
    "Bar",
    "Timeline",
    "chosen_bars",
    "timeline_of_record",
    "timeline_of_results",
]

NEVER_STARTED = (Status.SKIPPED, Status.NOT_RUN)  # no bar: they take no time
# The PNG's colours (GitHub's Primer palette): green passed, reds for the failures, grey for the rest.
STATUS_COLOURS = {
    Status.PASSED: "#2da44e",
    Status.FAILED: "#cf222e",
    Status.MISMATCH: "#fa4549",
    Status.TIMED_OUT: "#a40e26",
    Status.ERROR: "#82071e",
    Status.SKIPPED: "#8c959f",
    Status.NOT_RUN: "#d0d7de",
}


@frozen
class Bar:
    """One block on the timeline: when it started, for how long, and what it cost."""

    ordinal: int
    label: str  # "#test" or "#test-setup"
    name: str  # the id, else the store, else "#ORDINAL": as the log names it
    status: Status
    start_s: float  # seconds since the guide started
    duration_s: float
    peak_rss_bytes: int | None
    cpu_s: float | None

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def colour(self) -> str:
        return STATUS_COLOURS[self.status]


@frozen
class Timeline:
    """One guide's timeline."""

    guide: str
    bars: tuple[Bar, ...]  # the blocks that started, in run order
    not_drawn: tuple[tuple[Status, int], ...]  # blocks that never started, by status, in Status's order
    estimated: bool = False  # some starts were made up from the durations (a record older than version 3)

    @property
    def end_s(self) -> float:
        return max((bar.end_s for bar in self.bars), default=0.0)


def timeline_of_results(guide: str, results: Iterable[BlockResult]) -> Timeline:
    """The timeline of a guide's blocks, run now or read back: bars for those that started; a block without its
    start (a record older than version 3) begins where the bar before it ended."""
    bars: list[Bar] = []
    never: Counter[Status] = Counter()
    estimated = False
    for r in results:
        if r.status in NEVER_STARTED:
            never[r.status] += 1
            continue
        start = r.start_s
        if start is None:
            start, estimated = (bars[-1].end_s if bars else 0.0), True
        step, duration = r.step, max(r.duration_s, 0.0)
        bars.append(
            Bar(
                step.ordinal,
                step.label.value,
                step.name,
                r.status,
                max(start, 0.0),
                duration,
                r.peak_rss_bytes,
                r.cpu_s,
            )
        )
    return Timeline(guide, tuple(bars), tuple((s, never[s]) for s in Status if never[s]), estimated)


def timeline_of_record(guide: RecordedGuide) -> Timeline:
    """The timeline of a guide read back from results.json (before version 3: starts made up from the durations)."""
    return timeline_of_results(guide.guide, guide.blocks)


def chosen_bars(timeline: Timeline, limit: int) -> tuple[Bar, ...]:
    """At most `limit` bars, in run order: all when they fit, else every failing one first, then the longest others."""
    if len(timeline.bars) <= limit:
        return timeline.bars
    ranked = sorted(timeline.bars, key=lambda bar: (not bar.status.is_failure, -bar.duration_s, bar.ordinal))
    kept = {bar.ordinal for bar in ranked[:limit]}
    return tuple(bar for bar in timeline.bars if bar.ordinal in kept)
