"""GitHub Actions: workflow-command escaping, stop-commands, annotations, the step summary and step outputs."""

from __future__ import annotations

import html
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.core.model import BlockResult, GuideOutcome, Problem, Status
from ci.core.text import NO_SECRETS, Masker, clean_text, human_size
from ci.report.details import cleanup_failed, command_shown, predating_note
from ci.report.recap import with_reason
from ci.report.tally import block_tally
from ci.report.timeline import timeline_of_results
from ci.report.timeline.gantt import gantt_chart

__all__ = [
    "BLOCKS_SUMMARY_SHOWN_BYTES",
    "LEGACY_COMMAND",
    "MAX_ANNOTATIONS",
    "SUMMARY_LIMIT_BYTES",
    "RunnerFileWrite",
    "StopCommands",
    "annotation",
    "blocks_summary",
    "code_block",
    "code_cell",
    "code_span",
    "command_safe",
    "escape_data",
    "escape_property",
    "failure_annotations",
    "fit_summary",
    "in_github_actions",
    "output_entry",
    "private_files_note",
    "problem_annotations",
    "runner_file_writes",
    "step_outputs",
    "step_summary",
    "table_cell",
]

# The runner's older form of a workflow command (`##[error]...`, `##[stop-commands]...`): it is read
# anywhere in a line, not only at its start as `::error::` is.
LEGACY_COMMAND = "##["
MAX_ANNOTATIONS = 10  # Actions shows at most 10 error annotations per step
SUMMARY_LIMIT_BYTES = 1000 * 1024  # the step summary must stay under 1 MiB
# of what the guide's blocks wrote to their own step summary, the runner's shows at most this much (as text)
BLOCKS_SUMMARY_SHOWN_BYTES = 64 * 1024
# A job's outputs may hold 1 MB in all; a guide has far fewer blocks, so this only bounds a runaway list.
MAX_FAILING_LISTED = 50
_NOTE_CHARS = 600  # of a block's message and reason, the step summary's table shows this much


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value (file, title, ...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class StopCommands:
    """Wraps untrusted text so that nothing in it is read as a workflow command."""

    def __init__(self) -> None:
        self.token = os.urandom(16).hex()  # unguessable by the blocks whose output it wraps

    @property
    def stop_line(self) -> str:
        """The line after which the runner reads no workflow command."""
        return f"::stop-commands::{self.token}"

    @property
    def resume_line(self) -> str:
        """The line that ends the stop: the runner sees it only at the start of a line, as any workflow command."""
        return f"::{self.token}::"

    def wrap(self, text: str) -> str:
        return f"{self.stop_line}\n{text}\n{self.resume_line}"

    def guard(self, text: str) -> str:
        """Lines of the harness's own that may quote a block (a verdict, the recap, a heartbeat), safe to write.

        The runner reads `::command::` at the start of a line, blanks before it
        skipped, and the older `##[command]` anywhere in a line: text holding
        either is wrapped.
        """
        if LEGACY_COMMAND in text or any(line.lstrip().startswith("::") for line in text.split("\n")):
            return self.wrap(text)
        return text


def command_safe(text: str, github: bool) -> str:
    """TEXT to print as it is, or under Actions wrapped when it holds what the runner would read as a command.

    For text printed outside the run's console that may quote a guide or a
    block (guide warnings, document errors, the drift report, the --update
    diff): in a pull request's check, the guide is the author's.
    """
    return StopCommands().guard(text) if github else text


def _annotation_path(file: str) -> str:
    """The guide's path as Actions wants it: relative to the workspace when inside it."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace:
        try:
            return str(Path(file).resolve().relative_to(Path(workspace).resolve()))
        except ValueError:
            pass
    return file


def annotation(kind: str, file: str | None, line: int, title: str, message: str, *, masker: Masker = NO_SECRETS) -> str:
    """One `::error file=...,line=...,title=...::message` line; `masker` for a title or message with run output."""
    props = []
    if file:
        props.append(f"file={escape_property(_annotation_path(file))}")
        if line:
            props.append(f"line={line}")
    props.append(f"title={escape_property(clean_text(title, masker))}")
    return f"::{kind} {','.join(props)}::{escape_data(clean_text(message, masker))}"


def failure_annotations(outcomes: Sequence[GuideOutcome], *, masker: Masker) -> list[str]:
    """Error annotations for failed blocks, the most useful first, at most MAX_ANNOTATIONS.

    The first failure of each guide comes first (it is usually the cause; the
    rest often follow from it), then timeouts, then the others.
    """
    ranked: list[tuple[int, int, BlockResult, GuideOutcome]] = []
    for outcome in outcomes:
        failures = [r for r in outcome.results if r.status.is_failure]
        for position, result in enumerate(failures):
            rank = 0 if position == 0 else (1 if result.status is Status.TIMED_OUT else 2)
            ranked.append((rank, position, result, outcome))
    ranked.sort(key=lambda item: (item[0], item[1]))
    lines = []
    for _, _, result, outcome in ranked[:MAX_ANNOTATIONS]:
        step = result.step
        title = f"{step.label.value} {step.name}: {result.status.value}"
        line = result.failure_line  # a mismatch: its first failing expected line; else the block
        message = with_reason(result.message, result.reason) + _attempts_said(result)
        lines.append(annotation("error", outcome.plan.source_path, line, title, message, masker=masker))
    return lines


_ATTEMPT_MESSAGE_CHARS = 80  # an annotation quotes at most this much of each earlier attempt's message


def _attempts_said(result: BlockResult) -> str:
    """` (attempt 3 of 3; earlier: exit 1; exit 1)` after a retried block's message; "" for one run once."""
    if not result.attempts:
        return ""
    earlier = "; ".join(attempt.message[:_ATTEMPT_MESSAGE_CHARS] for attempt in result.attempts)
    return f" (attempt {len(result.attempts) + 1} of {result.step.retry + 1}; earlier: {earlier})"


def _flaky_lines(results: Sequence[BlockResult], masker: Masker) -> list[str]:
    """The step summary's list of blocks that passed only after failed attempts; [] when none did."""
    flaky = [result for result in results if result.status is Status.PASSED and result.attempts]
    if not flaky:
        return []
    lines = ["\nFlaky blocks (passed after failed attempts, retry=):\n"]
    for result in flaky:
        step = result.step
        earlier = "; ".join(attempt.message[:_ATTEMPT_MESSAGE_CHARS] for attempt in result.attempts)
        lines.append(
            f"- {code_cell(f'{step.label.value} {step.name}', masker)} (line {step.line}): passed on attempt"
            f" {len(result.attempts) + 1} of {step.retry + 1}; earlier: {table_cell(earlier, masker)}"
        )
    return lines


def cleanup_annotations(outcomes: Sequence[GuideOutcome], *, masker: Masker) -> list[str]:
    """A warning annotation per ci.cleanup command that failed, on its guide (the verdict is not its to change)."""
    lines = []
    for outcome in outcomes:
        for index, command in enumerate(outcome.cleanup, start=1):
            if cleanup_failed(command):
                title = f"cleanup {index}/{len(outcome.cleanup)} failed"
                message = f"{command_shown(command.command)}: {command.message}; the verdict is the blocks'"
                lines.append(annotation("warning", outcome.plan.source_path, 0, title, message, masker=masker))
    return lines[:MAX_ANNOTATIONS]


def problem_annotations(problems: Sequence[Problem], source_paths: dict[str, str | None]) -> list[str]:
    """Error annotations for document errors (first MAX_ANNOTATIONS)."""
    return [
        annotation(
            "error",
            source_paths.get(p.file, p.file if p.file != "command line" else None),
            p.line,
            "guide document error",
            p.message,
        )
        for p in problems[:MAX_ANNOTATIONS]
    ]


# The signs with which text in a cell or heading would become HTML, an entity (`&#x2705;`), a link or an
# image, emphasis or a code span: each is written with a backslash, which Markdown reads as the sign itself.
_MARKDOWN_SIGN = re.compile(r"[\\`*_\[\]<>&~|]")


def table_cell(text: str, masker: Masker = NO_SECRETS) -> str:
    """TEXT as the step summary shows it in a table cell or a heading: cleaned, on one line, and nothing in it
    read as Markdown or HTML (a guide's `</table><h3>passed</h3>` shows as those characters)."""
    return _MARKDOWN_SIGN.sub(lambda sign: "\\" + sign.group(), clean_text(text, masker)).replace("\n", " ")


def code_cell(text: str, masker: Masker = NO_SECRETS, *, limit_chars: int | None = None) -> str:
    """TEXT as a code span in a table cell: cleaned (then cut to LIMIT_CHARS), on one line, `|` escaped (which
    GFM's tables read first)."""
    return code_span(clean_text(text, masker).replace("|", "\\|").replace("\n", " ")[:limit_chars])


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


def step_summary(outcomes: Sequence[GuideOutcome], *, masker: Masker) -> str:
    """The Markdown step summary: per guide, a verdict line, a table of blocks and a Mermaid chart of their timeline."""
    parts: list[str] = []
    for outcome in outcomes:
        verdict = "interrupted" if outcome.interrupted_by else ("failed" if outcome.failed else "passed")
        icon = {"passed": "✅", "failed": "❌", "interrupted": "⚠️"}[verdict]
        tally = block_tally(outcome.results)
        parts.append(
            f"### {icon} {table_cell(outcome.plan.guide, masker)}: {verdict} ({tally}) in {outcome.duration_s:.1f}s\n"
        )
        parts.append("| # | block | status | duration | exit | peak RSS | CPU | line | note |")
        parts.append("|---|---|---|---|---|---|---|---|---|")
        for result in outcome.results:
            step = result.step
            rss = human_size(result.peak_rss_bytes) if result.peak_rss_bytes else ""
            cpu = f"{result.cpu_s:.1f}s" if result.cpu_s is not None else ""
            exit_code = "" if result.exit_code is None else str(result.exit_code)
            note = "" if result.status is Status.PASSED else with_reason(result.message, result.reason)
            parts.append(
                f"| {step.ordinal} | {code_cell(f'{step.label.value} {step.name}', masker)} | {result.status.value} "
                f"| {result.duration_s:.1f}s | {exit_code} | {rss} | {cpu} | {result.failure_line} | {table_cell(note, masker)[:_NOTE_CHARS]} |"
            )
        parts += _flaky_lines(outcome.results, masker)
        chart = gantt_chart(timeline_of_results(outcome.plan.guide, outcome.results))
        if chart:
            parts.append(f"\n{chart.rstrip()}")
        parts += _predating_lines(outcome, masker)
        failed = [(i, c) for i, c in enumerate(outcome.cleanup, start=1) if cleanup_failed(c)]
        if failed:
            parts.append("\nCleanup commands (ci.cleanup) that did not do their work; the verdict stands:\n")
            for index, command in failed:
                shown = code_cell(command_shown(command.command), masker, limit_chars=200)
                parts.append(f"- {index}/{len(outcome.cleanup)} {shown}: {table_cell(command.message, masker)}")
        if outcome.leftovers:
            parts.append("\nProcesses ended when the run finished:\n")
            for proc in outcome.leftovers:
                parts.append(
                    f"- pid {proc.pid} {code_cell(proc.command, masker, limit_chars=200)} (from {table_cell(proc.started_by, masker)}): {proc.ended_by}"
                )
        parts.append("")
    return fit_summary("\n".join(parts) + "\n", "results.json")


def _predating_lines(outcome: GuideOutcome, masker: Masker) -> list[str]:
    """The collected files last modified before the guide started: what the run kept of them may be old."""
    files = [f for f in outcome.collection.files if f.predates_run] if outcome.collection is not None else []
    lines = ["\nCollected files that predate this guide (ci.collect):\n"] if files else []
    for entry in files[:30]:
        when = predating_note(entry.modified_at or 0.0)  # predates_run is set from modified_at
        lines.append(f"- {code_cell(entry.source, masker, limit_chars=200)}: {when}")
    return lines + ([f"- ... and {len(files) - 30} more (results.json lists them)"] if len(files) > 30 else [])


def output_entry(name: str, value: str) -> str:
    """One step output in $GITHUB_OUTPUT's syntax: `name=value`, or the delimited form when value spans lines.

    The runner reads the file line by line, so a value with a line break written as `name=value` would
    end early and its next line would be read as another output. The delimiter is chosen to differ from
    every line of the value, so no value can end its own entry, and is random, so that no text written
    before it can have been made to end it.
    """
    if "\n" not in value:
        return f"{name}={value}\n"
    lines = set(value.split("\n"))
    delimiter = next(d for _ in itertools.count() if (d := f"GUIDE_GUARD_EOF_{os.urandom(16).hex()}") not in lines)
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def step_outputs(outcomes: Sequence[GuideOutcome], exit_status: int, *, masker: Masker) -> str:
    """The run's outcome as step outputs, for jobs that cannot count on the artifact (docs/ci.md).

    `verdict`: passed, failed or interrupted (from the exit status); `exit_status`; `counts`: a JSON
    object of block status to number of blocks, in the order of Status; `failing`: the names of the
    blocks that failed, mismatched, timed out or could not run, one per line (`GUIDE: NAME` when the
    run had several guides), at most MAX_FAILING_LISTED and then a line saying how many more; `duration_s`:
    the seconds the guides took, for the status board.
    """
    verdict = "passed" if exit_status == 0 else ("interrupted" if exit_status >= 128 else "failed")
    tally = Counter(result.status for outcome in outcomes for result in outcome.results)
    counts = {status.value: tally[status] for status in Status if tally[status]}
    failing = [
        clean_text(f"{outcome.plan.guide}: {result.step.name}" if len(outcomes) > 1 else result.step.name, masker)
        for outcome in outcomes
        for result in outcome.results
        if result.status.is_failure
    ]
    if len(failing) > MAX_FAILING_LISTED:
        failing[MAX_FAILING_LISTED:] = [f"... and {len(failing) - MAX_FAILING_LISTED} more (see results.json)"]
    return "".join(
        [
            output_entry("verdict", verdict),
            # int(): an ExitCode is an IntEnum, whose str() is `ExitCode.FAILED` on Python 3.10, not `1`
            output_entry("exit_status", str(int(exit_status))),
            output_entry("counts", json.dumps(counts, separators=(",", ":"))),
            output_entry("failing", "\n".join(failing)),
            output_entry("duration_s", f"{sum(outcome.duration_s for outcome in outcomes):.1f}"),
        ]
    )


def blocks_summary(path: Path, masker: Masker, room_bytes: int) -> str:
    """What the guide's blocks wrote to their own $GITHUB_STEP_SUMMARY (the run's private copy at PATH), for the
    runner's: in a fold, as text that cannot close or hide anything of the harness's, at most ROOM_BYTES of it."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(BLOCKS_SUMMARY_SHOWN_BYTES)
    except OSError as exc:  # a block's process removed it, say
        return f"\nWhat the guide's blocks wrote to their step summary could not be read ({exc.strerror}).\n"
    shown_bytes = min(len(head), room_bytes - 1024)  # the fold's own lines, and the room a cut line needs
    where = html.escape(str(path))
    if shown_bytes <= 0:
        return f"\nThe guide's blocks wrote {human_size(size)} to their step summary, kept in {code_span(str(path))}.\n"
    text = clean_text(head[:shown_bytes].decode("utf-8", "replace"), masker)
    shown = "" if shown_bytes == size else f", the first {human_size(shown_bytes)} shown"
    title = f"What the guide's blocks wrote to their step summary ({human_size(size)}{shown}; kept in {where}), as text"
    return f"\n<details><summary>{title}</summary>\n\n{code_block(text)}\n\n</details>\n"


@dataclass(frozen=True)
class RunnerFileWrite:
    """What the harness appends to one of the runner's files once the run is over."""

    what: str  # "the step summary": for messages
    path: Path  # the runner's file
    text: str
    replaces: bool  # when it cannot be written, an earlier run's entries there are removed (ci.session)


def runner_file_writes(
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    *,
    masker: Masker,
    environ: Mapping[str, str],
    blocks_wrote: Mapping[str, Path],
) -> list[RunnerFileWrite]:
    """Under Actions: the step summary (what blocks wrote to theirs quoted after it) and the step outputs.

    BLOCKS_WROTE: the run's private copies of the runner's files that blocks
    wrote to (ci.runner.actions_files); of those, only the summary is passed
    on, and only as text.
    """
    writes = []
    summary_path = environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        summary = step_summary(outcomes, masker=masker)
        if "GITHUB_STEP_SUMMARY" in blocks_wrote:
            room = SUMMARY_LIMIT_BYTES - len(summary.encode())
            summary += blocks_summary(blocks_wrote["GITHUB_STEP_SUMMARY"], masker, room)
        writes.append(RunnerFileWrite("the step summary", Path(summary_path), summary, replaces=False))
    # the outcome for later jobs, which must not depend on the artifact upload reaching GitHub (docs/ci.md)
    outputs_path = environ.get("GITHUB_OUTPUT")
    if outputs_path:
        outputs = step_outputs(outcomes, exit_status, masker=masker)
        writes.append(RunnerFileWrite("the step outputs", Path(outputs_path), outputs, replaces=True))
    return writes


def private_files_note(blocks_wrote: Mapping[str, Path], github: bool) -> str | None:
    """The line saying which of the runner's files blocks wrote to, and that the runner reads none of it."""
    if not blocks_wrote:
        return None
    named = ", ".join(f"${name} ({path})" for name, path in blocks_wrote.items())
    summary = " (the step summary's is quoted as text at the end of the runner's)" if github else ""
    return (
        f"warning: blocks wrote to {named}: each block sees the run's own copy of these files, which the"
        f" Actions runner never reads{summary}; see docs/authoring.md, section 13a"
    )
