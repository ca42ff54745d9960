"""GitHub Actions: workflow-command escaping, stop-commands, annotations, and what the runner's files get (the
step summary, ci.report.summary, and the step outputs)."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.base import frozen
from ci.base.text import clean_text
from ci.guide.model import Problem, Status
from ci.record.outcome import BlockResult, GuideOutcome
from ci.report.details import cleanup_failed, command_shown, earlier_attempts
from ci.report.recap import with_reason

__all__ = [
    "LEGACY_COMMAND",
    "MAX_ANNOTATIONS",
    "RunnerFileWrite",
    "StopCommands",
    "annotation",
    "block_warning_annotations",
    "command_safe",
    "escape_data",
    "escape_property",
    "failure_annotations",
    "in_github_actions",
    "output_entry",
    "private_files_note",
    "problem_annotations",
    "runner_file_writes",
    "step_outputs",
]

# The runner's older form of a workflow command (`##[error]...`, `##[stop-commands]...`): it is read
# anywhere in a line, not only at its start as `::error::` is.
LEGACY_COMMAND = "##["
MAX_ANNOTATIONS = (
    10  # A job's outputs may hold 1 MB in all; a guide has far fewer blocks, so this only bounds a runaway list.
)
MAX_FAILING_LISTED = 50


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


def annotation(kind: str, file: str | None, line: int, title: str, message: str) -> str:
    """One `::error file=...,line=...,title=...::message` line, its title and message masked by the run's policy."""
    props = []
    if file:
        props.append(f"file={escape_property(_annotation_path(file))}")
        if line:
            props.append(f"line={line}")
    props.append(f"title={escape_property(clean_text(title))}")
    return f"::{kind} {','.join(props)}::{escape_data(clean_text(message))}"


def failure_annotations(outcomes: Sequence[GuideOutcome]) -> list[str]:
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
        lines.append(annotation("error", outcome.plan.source_path, line, title, message))
    return lines


def _attempts_said(result: BlockResult) -> str:
    """` (attempt 3 of 3; earlier: exit 1; exit 1)` after a retried block's message; "" for one run once."""
    if not result.attempts:
        return ""
    return f" (attempt {len(result.attempts) + 1} of {result.step.retry + 1}; earlier: {earlier_attempts(result)})"


def cleanup_annotations(outcomes: Sequence[GuideOutcome]) -> list[str]:
    """A warning annotation per ci.cleanup command that failed, on its guide (the verdict is not its to change)."""
    lines = []
    for outcome in outcomes:
        for index, command in enumerate(outcome.cleanup, start=1):
            if cleanup_failed(command):
                title = f"cleanup {index}/{len(outcome.cleanup)} failed"
                message = f"{command_shown(command.command)}: {command.message}; the verdict is the blocks'"
                lines.append(annotation("warning", outcome.plan.source_path, 0, title, message))
    return lines[:MAX_ANNOTATIONS]


def block_warning_annotations(outcomes: Sequence[GuideOutcome]) -> list[str]:
    """A warning annotation on each block's fence for each of its warnings (a stored value spanning lines or holding
    progress output), at most MAX_ANNOTATIONS."""
    lines = []
    for outcome in outcomes:
        for result in outcome.results:
            for warning in result.warnings:
                title = f"{result.step.label.value} {result.step.name}: warning"
                lines.append(annotation("warning", outcome.plan.source_path, result.step.line, title, warning))
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


def step_outputs(outcomes: Sequence[GuideOutcome], exit_status: int) -> str:
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
        clean_text(f"{outcome.plan.guide}: {result.step.name}" if len(outcomes) > 1 else result.step.name)
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


@frozen
class RunnerFileWrite:
    """What the harness appends to one of the runner's files once the run is over."""

    what: str  # "the step summary": for messages
    path: Path  # the runner's file
    text: str
    replaces: bool  # when it cannot be written, an earlier run's entries there are removed (ci.run.session)


def runner_file_writes(
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    *,
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
        from ci.report.summary import SUMMARY_LIMIT_BYTES, blocks_summary, step_summary  # its timeline: Actions only

        summary = step_summary(outcomes)
        if "GITHUB_STEP_SUMMARY" in blocks_wrote:
            room = SUMMARY_LIMIT_BYTES - len(summary.encode())
            summary += blocks_summary(blocks_wrote["GITHUB_STEP_SUMMARY"], room)
        writes.append(RunnerFileWrite("the step summary", Path(summary_path), summary, replaces=False))
    # the outcome for later jobs, which must not depend on the artifact upload reaching GitHub (docs/ci.md)
    outputs_path = environ.get("GITHUB_OUTPUT")
    if outputs_path:
        outputs = step_outputs(outcomes, exit_status)
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
        f" Actions runner never reads{summary}; see docs/guarantees.md, section 1"
    )
