"""The Markdown step summary: per guide a verdict, a table of blocks, a timeline chart, and what else a reader needs."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path

from ci.base.streams import read_head
from ci.base.text import clean_text, human_size
from ci.guide.model import Status
from ci.record.outcome import BlockResult, GuideOutcome
from ci.report.details import cleanup_failed, command_shown, earlier_attempts, predating_note
from ci.report.recap import block_tally, with_reason
from ci.report.timeline import timeline_of_results
from ci.report.timeline.gantt import gantt_chart

__all__ = [
    "BLOCKS_SUMMARY_SHOWN_BYTES",
    "SUMMARY_LIMIT_BYTES",
    "blocks_summary",
    "code_block",
    "code_cell",
    "code_span",
    "fit_summary",
    "step_summary",
    "table_cell",
]

# Actions shows at most 10 error annotations per step
SUMMARY_LIMIT_BYTES = 1000 * 1024  # the step summary must stay under 1 MiB
# of what the guide's blocks wrote to their own step summary, the runner's shows at most this much (as text)
BLOCKS_SUMMARY_SHOWN_BYTES = 64 * 1024
_NOTE_CHARS = 600  # of a block's message and reason, the step summary's table shows this much

# The signs with which text in a cell or heading would become HTML, an entity (`&#x2705;`), a link or an
# image, emphasis or a code span: each is written with a backslash, which Markdown reads as the sign itself.
_MARKDOWN_SIGN = re.compile(r"[\\`*_\[\]<>&~|]")


def table_cell(text: str) -> str:
    """TEXT as the step summary shows it in a table cell or a heading: cleaned, on one line, and nothing in it
    read as Markdown or HTML (a guide's `</table><h3>passed</h3>` shows as those characters)."""
    return _MARKDOWN_SIGN.sub(lambda sign: "\\" + sign.group(), clean_text(text)).replace("\n", " ")


def code_cell(text: str, *, limit_chars: int | None = None) -> str:
    """TEXT as a code span in a table cell: cleaned (then cut to LIMIT_CHARS), on one line, `|` escaped (which
    GFM's tables read first)."""
    return code_span(clean_text(text).replace("|", "\\|").replace("\n", " ")[:limit_chars])


def code_span(text: str) -> str:
    """TEXT as a Markdown code span that nothing in it can end: fenced by more backticks than it holds in a row."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""  # else they would join the fence
    return f"{fence}{padding}{text}{padding}{fence}"


def code_block(text: str) -> str:
    """TEXT as a fenced Markdown code block that no line of it can end: fenced by more backticks than it holds in a row.

    Inside it nothing is Markdown or HTML: an unclosed `<!--`, a heading or a
    table a block wrote shows as the text it is.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def fit_summary(text: str, rest_in: str) -> str:
    """A step summary cut to stay under SUMMARY_LIMIT_BYTES (GitHub refuses larger), saying where the rest is."""
    if len(text.encode()) <= SUMMARY_LIMIT_BYTES:
        return text
    cut = text.encode()[: SUMMARY_LIMIT_BYTES - 200].decode("utf-8", "ignore")
    chart = cut.rfind("\n```mermaid\n")
    if chart != -1 and "\n```\n" not in cut[chart + 1 :]:  # a chart cut short would not be drawn at all
        cut = cut[:chart]
    return f"{cut}\n\n(summary cut to stay under the 1 MiB limit; see {rest_in})\n"


def step_summary(outcomes: Sequence[GuideOutcome]) -> str:
    """The Markdown step summary: per guide, a verdict line, a table of blocks and a Mermaid chart of their timeline."""
    parts: list[str] = []
    for outcome in outcomes:
        verdict = "interrupted" if outcome.interrupted_by else ("failed" if outcome.failed else "passed")
        icon = {"passed": "✅", "failed": "❌", "interrupted": "⚠️"}[verdict]
        tally = block_tally(outcome.results)
        parts.append(f"### {icon} {table_cell(outcome.plan.guide)}: {verdict} ({tally}) in {outcome.duration_s:.1f}s\n")
        parts.append("| # | block | status | duration | exit | peak RSS | CPU | line | note |")
        parts.append("|---|---|---|---|---|---|---|---|---|")
        for result in outcome.results:
            step = result.step
            rss = human_size(result.peak_rss_bytes) if result.peak_rss_bytes else ""
            cpu = f"{result.cpu_s:.1f}s" if result.cpu_s is not None else ""
            exit_code = "" if result.exit_code is None else str(result.exit_code)
            note = "" if result.status is Status.PASSED else with_reason(result.message, result.reason)
            parts.append(
                f"| {step.ordinal} | {code_cell(f'{step.label.value} {step.name}')} | {result.status.value} "
                f"| {result.duration_s:.1f}s | {exit_code} | {rss} | {cpu} | {result.failure_line} | {table_cell(note)[:_NOTE_CHARS]} |"
            )
        parts += _flaky_lines(outcome.results)
        chart = gantt_chart(timeline_of_results(outcome.plan.guide, outcome.results))
        if chart:
            parts.append(f"\n{chart.rstrip()}")
        parts += _predating_lines(outcome)
        failed = [(i, c) for i, c in enumerate(outcome.cleanup, start=1) if cleanup_failed(c)]
        if failed:
            parts.append("\nCleanup commands (ci.cleanup) that did not do their work; the verdict stands:\n")
            for index, command in failed:
                shown = code_cell(command_shown(command.command), limit_chars=200)
                parts.append(f"- {index}/{len(outcome.cleanup)} {shown}: {table_cell(command.message)}")
        if outcome.leftovers:
            parts.append("\nProcesses ended when the run finished:\n")
            for proc in outcome.leftovers:
                parts.append(
                    f"- pid {proc.pid} {code_cell(proc.command, limit_chars=200)} (from {table_cell(proc.started_by)}): {proc.ended_by}"
                )
        parts.append("")
    return fit_summary("\n".join(parts) + "\n", "results.json")


def _predating_lines(outcome: GuideOutcome) -> list[str]:
    """The collected files last modified before the guide started: what the run kept of them may be old."""
    files = [f for f in outcome.collection.files if f.predates_run] if outcome.collection is not None else []
    lines = ["\nCollected files that predate this guide (ci.collect):\n"] if files else []
    for entry in files[:30]:
        when = predating_note(entry.modified_at or 0.0)  # predates_run is set from modified_at
        lines.append(f"- {code_cell(entry.source, limit_chars=200)}: {when}")
    return lines + ([f"- ... and {len(files) - 30} more (results.json lists them)"] if len(files) > 30 else [])


def _flaky_lines(results: Sequence[BlockResult]) -> list[str]:
    """The step summary's list of blocks that passed only after failed attempts; [] when none did."""
    flaky = [result for result in results if result.status is Status.PASSED and result.attempts]
    if not flaky:
        return []
    lines = ["\nFlaky blocks (passed after failed attempts, retry=):\n"]
    for result in flaky:
        step = result.step
        lines.append(
            f"- {code_cell(f'{step.label.value} {step.name}')} (line {step.line}): passed on attempt"
            f" {len(result.attempts) + 1} of {step.retry + 1}; earlier: {table_cell(earlier_attempts(result))}"
        )
    return lines


def blocks_summary(path: Path, room_bytes: int) -> str:
    """What the guide's blocks wrote to their own $GITHUB_STEP_SUMMARY (the run's private copy at PATH), for the
    runner's: in a fold, as text that cannot close or hide anything of the harness's, at most ROOM_BYTES of it."""
    room = min(BLOCKS_SUMMARY_SHOWN_BYTES, room_bytes - 1024)  # the fold's own lines, and the room a cut line needs
    try:
        head, size, _ = read_head(path, max(room, 0))  # a cut never inside a secret
    except OSError as exc:  # a block's process removed it, say
        return f"\nWhat the guide's blocks wrote to their step summary could not be read ({exc.strerror}).\n"
    where = html.escape(str(path))
    if room <= 0:
        return f"\nThe guide's blocks wrote {human_size(size)} to their step summary, kept in {code_span(str(path))}.\n"
    text = clean_text(head)
    shown_bytes = min(room, size)
    shown = "" if shown_bytes == size else f", the first {human_size(shown_bytes)} shown"
    title = f"What the guide's blocks wrote to their step summary ({human_size(size)}{shown}; kept in {where}), as text"
    return f"\n<details><summary>{title}</summary>\n\n{code_block(text)}\n\n</details>\n"
