"""The job log: a header before each block, its verdict after, the output that matters, and a recap at the end."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ci.base.signals import start_deaf
from ci.base.text import clean_text, human_size, plural
from ci.guide.model import Problem, Status, Step
from ci.record.outcome import STILL_RUNNING, Attempt, BlockResult, Collection, DiagnosticResult, GuideOutcome
from ci.report.colour import NO_COLOUR, Palette, status_colour
from ci.report.details import (
    block_details,
    cleanup_failed,
    cleanup_sections,
    command_shown,
    named_streams,
    predating_note,
    stream_sizes,
)
from ci.report.github import (
    StopCommands,
    block_warning_annotations,
    cleanup_annotations,
    escape_data,
    failure_annotations,
)
from ci.report.live import LIVE_LIMIT_BYTES, BlockWatch, LiveWatcher
from ci.report.recap import block_tally, did_not_pass_parts

__all__ = [
    "LIVE_LIMIT_BYTES",
    "RECAP_LINES",
    "ConsoleReporter",
    "attempt_words",
    "cleanup_lines",
    "collection_lines",
    "format_problems",
    "retry_line",
]

RECAP_LINES = 50  # failing blocks the recap names one by one; results.json and the step summary list them all


def format_problems(problems: Sequence[Problem], kind: str = "[ERROR]") -> str:
    return "\n".join(f"{kind} {problem}" for problem in problems)


def _header(step: Step, total: int) -> str:
    """One line, whatever the guide holds: a setext heading spans two, and under Actions the second would run."""
    name = " ".join(step.named_by[:1])
    where = f"{step.file}:{step.line}"
    section = f' in "{step.heading}"' if step.heading else ""
    hidden = " (hidden)" if step.hidden else ""
    return " ".join(
        clean_text(f"[{step.ordinal}/{total}] {step.label.value} {name}{hidden}{section} at {where}").split()
    )


def _verdict_parts(result: BlockResult, total: int) -> tuple[str, str, str]:
    """The verdict line around its status word: `[2/5] hello: `, `PASSED`, ` in 0.01s (exit 0, ...)`."""
    step = result.step
    word = result.status.value.upper()
    head = f"[{step.ordinal}/{total}] {step.name}: "
    if result.status in (Status.SKIPPED, Status.NOT_RUN):
        return head, word, f": {result.message}"
    sizes = stream_sizes(result)
    exit_text = "" if result.exit_code is None else f"exit {result.exit_code}, "
    tail = f"{attempt_words(result)} in {result.duration_s:.2f}s ({exit_text}{sizes})"
    if result.status.is_failure:
        return f"[ERROR] {head}", word, f"{tail}: {result.message} ({_where(result)})"
    return head, word, tail


def attempt_words(result: BlockResult) -> str:
    """` on attempt 2 of 3` after the status word of a block that was retried; "" for one run once."""
    return f" on attempt {len(result.attempts) + 1} of {result.step.retry + 1}" if result.attempts else ""


def _seconds(seconds: float) -> str:
    return f"{seconds:g}s" if seconds < 60 else f"{seconds / 60:g}m"


def retry_line(step: Step, attempt: Attempt, total: int, delay_s: float) -> str:
    """`[2/5] pip: attempt 1 of 3 failed (exit 1); retrying in 10s`, with what was ended and where its output is."""
    what = "timed out" if attempt.status is Status.TIMED_OUT else attempt.status.value
    ended = f"; {plural(len(attempt.ended), 'process', 'processes')} it left running ended" if attempt.ended else ""
    files = [path for path in (attempt.stdout_path, attempt.stderr_path) if path is not None]
    files += sorted({str(Path(path).parent) + "/" for path in attempt.dumps})
    kept = f"; its output: {', '.join(files)}" if files else ""
    when = f"in {_seconds(delay_s)}" if delay_s else "now"
    return (
        f"[{step.ordinal}/{total}] {step.name}: attempt {attempt.number} of {step.retry + 1} {what}"
        f" ({attempt.message}); retrying {when}{ended}{kept}"
    )


def _where(result: BlockResult) -> str:
    """The `file:line` a failure is blamed on, the same in the verdict line and the recap."""
    return f"{result.step.file}:{result.failure_line}"


_COLLECTED_LINES = 30  # files listed in the log; results.json lists them all


def _one_line(name: str) -> str:
    """A file name on one line of the log: a line break in it written `\\n` (`\\r`), as it is on disk."""
    return name.replace("\r", "\\r").replace("\n", "\\n")


def collection_lines(collection: Collection) -> list[str]:
    """The log's account of ci.collect: where the copies went, each file with its size, the cap and any trouble."""
    copied = [f for f in collection.files if f.copied_to is not None]
    lines = [
        f"collected {plural(len(copied), 'file')} (ci.collect, each capped at its last"
        f" {human_size(collection.cap_bytes)}) into {collection.directory}"
    ]
    for entry in collection.files[:_COLLECTED_LINES]:
        source = _one_line(entry.source)  # a block names the files it makes: one may hold a line break
        if entry.copied_to is None:
            lines.append(f"  {source}: {entry.note}")  # not an [ERROR]: the guide's verdict stands
            continue
        size = human_size(entry.size_bytes)
        kept = f"last {human_size(entry.copied_bytes)} of {size} kept" if entry.truncated else size
        notes = [entry.note] if entry.note else []
        if entry.predates_run and entry.modified_at is not None:
            notes.append(predating_note(entry.modified_at))
        lines.append(f"  {source} ({kept}){': ' + '; '.join(notes) if notes else ''}")
    more = len(collection.files) - _COLLECTED_LINES + collection.files_left_out
    if more > 0:
        lines.append(f"  ... and {more} more (listed in results.json, but for any beyond the file limit)")
    lines += [f"  {pattern}: matched no file" for pattern in collection.unmatched]
    lines += [f"  {note}" for note in collection.notes]
    return lines


def cleanup_lines(cleanup: Sequence[DiagnosticResult]) -> list[str]:
    """The log's account of ci.cleanup: a line per command, then a warning line per one that failed."""
    if not cleanup:
        return []
    total = len(cleanup)
    lines = [f"cleanup (ci.cleanup, {plural(total, 'command')}):"]
    for index, command in enumerate(cleanup, start=1):
        took = f" in {command.duration_s:.2f}s" if command.output_path is not None else ""
        lines.append(f"  [{index}/{total}] {command_shown(command.command)}: {command.message}{took}")
    for index, command in enumerate(cleanup, start=1):
        if cleanup_failed(command):
            output = f"; its output: {command.output_path}" if command.output_path else ""
            lines.append(
                f"warning: cleanup {index}/{total} failed ({command.message}); the verdict stays the blocks'{output}"
            )
    return lines


class ConsoleReporter:
    """Writes the job log; under GitHub Actions adds groups, stop-commands and annotations.

    By default a passing block is one line (its header, ended by its verdict
    when nothing came between) and a failing block shows all that helps;
    `verbose` shows every block's sections. `stream` copies output live,
    `heartbeat_s` (0: never) says a block still runs after that long a silence,
    `colour` paints status words and diffs.
    """

    def __init__(
        self,
        out: TextIO = sys.stdout,
        *,
        github: bool = False,
        stream: bool = False,
        verbose: bool = False,
        heartbeat_s: float = 0.0,
        colour: bool = False,
    ) -> None:
        self.out = out
        self.github = github
        self.stream = stream
        self.verbose = verbose
        self.heartbeat_s = heartbeat_s
        self.palette = Palette(enabled=True) if colour else NO_COLOUR
        self.stop = StopCommands()
        self.watch: BlockWatch | None = None
        self.watcher: LiveWatcher | None = None  # the thread that ticks the watch, started with the first one
        self.started: Step | None = None  # the block whose header was written last, until its report
        self.header_open = False  # its header's line is not ended yet: the verdict may end it
        self.group_open = False  # under Actions, a block's fold is open between its start and end
        self.stopped = False  # under Actions with --stream, commands are stopped from a block's start to its report
        self.holding = False  # while True, lines are flushed together (one write for a block's report)
        self.watched: dict[str, Path] = {}  # the running block's stdout and stderr files
        self.total = 0  # the guide's number of blocks, as the running block's header counts them

    def _write(self, text: str) -> None:
        """TEXT, cleaned, masked and painted already, and a line end; under Actions, issuing no command it quotes."""
        if self.github and not text.startswith("::"):  # a workflow command of its own, or text wrapped already
            text = self.stop.guard(text)
        self.out.write(text + "\n")
        if not self.holding:
            self.out.flush()

    def line(self, text: str = "") -> None:
        self._write(clean_text(text))  # trusted text may quote the guide: cleaned too

    def untrusted(self, text: str, *, diff: bool = False) -> None:
        """Block output: never able to issue workflow commands; a DIFF's +/- lines painted once masked."""
        text = clean_text(text)
        if diff:
            text = self.palette.diff(text)
        self._write(self.stop.wrap(text) if self.github else text)

    def _painted(self, head: str, word: str, tail: str, colour: str) -> str:
        """HEAD + WORD + TAIL cleaned and masked, WORD (the harness's own) painted unless a secret spans it."""
        whole = clean_text(head + word + tail)
        head, tail = clean_text(head), clean_text(tail)
        if head + word + tail != whole:
            return whole
        return head + self.palette.paint(word, colour) + tail

    def guide_started(self, guide: str, steps: int) -> None:
        self.line(f"=== {guide}: {plural(steps, 'block')}")

    def block_started(self, step: Step, total: int, stdout_path: Path, stderr_path: Path) -> None:
        header = _header(step, total)
        self.started = step
        if self.github:
            self.line(f"::group::{escape_data(header)}")
            self.group_open = True
            if self.stream:
                self.line(self.stop.stop_line)
                self.stopped = True
        elif self.stream:
            self.line(f"==> {header}")
        else:  # left open: a passing block's verdict ends this line
            self.out.write(clean_text(f"==> {header}"))
            self.out.flush()
            self.header_open = True
        # merged streams: one file, which the heartbeat and --stream name as the block's output
        self.watched = named_streams(step.merge_streams, stdout_path, stderr_path)
        self.total = total
        self._watch(step)

    def _watch(self, step: Step, *, starts_in_s: float = 0.0) -> None:
        """With --stream or a heartbeat: watch the running block's files while it runs (from STARTS_IN_S on)."""
        if self.stream or self.heartbeat_s > 0:
            self.watch = BlockWatch(
                step.name,
                self.watched,
                self.out,
                stream=self.stream,
                heartbeat_s=self.heartbeat_s,
                at_line_start=not self.header_open,
                guard=self.stop.guard if self.github and not self.stream else None,  # --stream: inside the stop
                starts_in_s=starts_in_s,
            )
            if self.watcher is None:
                self.watcher = LiveWatcher()
                start_deaf(self.watcher)  # a stop signal wakes the main thread, which ends the block
            self.watcher.follow(self.watch)

    def block_retrying(self, step: Step, attempt: Attempt, delay_s: float) -> None:
        """A line that an attempt failed and another follows; then the next attempt is watched as the first was."""
        if self.watch is not None:  # its files are kept under other names now: the rest of them is shown first
            kept = named_streams(step.merge_streams, attempt.stdout_path, attempt.stderr_path)
            self.watch.moved({name: Path(path) for name, path in kept.items() if path is not None})
        header_open, mid_line = self._stop_watch()
        if header_open or mid_line:
            self.out.write("\n")
        self.line(retry_line(step, attempt, self.total, delay_s))
        # its files are made new: a --stream shows the next attempt's output from its start, and the heartbeat
        # counts from it (the pause is no block running silent)
        self._watch(step, starts_in_s=delay_s)

    def block_ending(self, step: Step, why: str) -> None:
        """The running block is being ended: its heartbeat says so (and WHY) rather than that it still runs."""
        if self.watch is not None:
            self.watch.ending = why

    def block_finished(self, result: BlockResult, total: int) -> None:
        self.holding = True
        try:
            self._block_report(result, total)
        finally:
            self.holding = False
            self._resume_commands()  # a report that failed half-way must not leave the runner deaf to commands
            self.out.flush()

    def close(self) -> None:
        """Stops watching a running block and ends an unended line: the console is the caller's again."""
        if any(self._stop_watch()):
            self.out.write("\n")
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        self._resume_commands()
        self.out.flush()

    def _resume_commands(self) -> None:
        """Ends a stop-commands left open, on a line of its own: the run's annotations come after it."""
        if self.stopped:
            self.out.write(f"\n{self.stop.resume_line}\n")
            self.stopped = False

    def _stop_watch(self) -> tuple[bool, bool]:
        """Stops the running block's watch, if any: whether its header's line is still open (nothing came after
        it), and whether the log is in the middle of another line (output --stream showed, unended)."""
        header_open, mid_line = self.header_open, False
        if self.watch is not None:
            assert self.watcher is not None  # started with the watch
            self.watcher.unfollow()
            self.watch.finish()
            if self.watch.wrote:  # it ended the header's line before its first write
                header_open, mid_line = False, not self.watch.at_line_start
            self.watch = None
        self.header_open = False
        return header_open, mid_line

    def _block_report(self, result: BlockResult, total: int) -> None:
        streamed = self.stream and self.started is result.step
        self.started = None
        header_open, mid_line = self._stop_watch()
        # under Actions a passing block's sections go inside its collapsed group: a green log holds what it printed
        verbose = self.verbose or self.github
        sections = block_details(result, verbose=verbose, streamed=streamed)
        head, word, tail = _verdict_parts(result, total)
        colour = status_colour(result.status)
        if header_open and not sections and not result.status.is_failure:
            self._write(self._painted(" -> ", word, tail, colour))  # the verdict ends the header's line
            return
        if header_open or mid_line:  # `printf 100%`: what follows starts a line (the resume line is seen only there)
            self.out.write("\n")
        if self.stopped:
            self.line(self.stop.resume_line)
            self.stopped = False
        if self.group_open and not result.status.is_failure:
            self._sections(sections)
        if self.group_open:
            self.line("::endgroup::")
            self.group_open = False
        if not self.github or result.status.is_failure:  # failures stay outside the fold, where readers look
            self._sections(sections)
        self._write(self._painted(head, word, tail, colour))
        for warning in result.warnings:  # after the verdict, outside the fold: a passing block's warning is seen
            self.line(f"warning: [{result.step.ordinal}/{total}] {result.step.name}: {warning}")

    def _sections(self, sections: list[tuple[str, str]]) -> None:
        for title, text in sections:
            self.line(f"--- {title}")
            self.untrusted(text, diff=title.startswith("diff"))

    def guide_finished(self, outcome: GuideOutcome) -> None:
        """What the guide left: the processes ended at its end and the files ci.collect kept (its verdict ends the run)."""
        if outcome.leftovers:
            left = sum(1 for proc in outcome.leftovers if proc.ended_by == STILL_RUNNING)
            if left:
                self.line(
                    f"processes still running at the end of the run, now ended; {left} of them could not be ended"
                    " and are still running:"
                )
            else:
                self.line("processes still running at the end of the run, now ended:")
            for proc in outcome.leftovers:
                self.line(f"  pid {proc.pid} (from block {proc.started_by}, {proc.ended_by}):")
                self.untrusted(f"    {clean_text(proc.command)[:300]}")  # masked, then cut
        if outcome.collection is not None:
            for text in collection_lines(outcome.collection):
                self.line(text)
        for text in cleanup_lines(outcome.cleanup):
            self.line(text)
        self._sections(cleanup_sections(outcome.cleanup))

    def run_finished(self, outcomes: Sequence[GuideOutcome], output_dir: Path) -> None:
        """The run's end: annotations (under Actions), where the outputs are, the recap of failures, the verdict."""
        if self.github:
            for text in failure_annotations(outcomes):
                self.line(text)
            for text in cleanup_annotations(outcomes):  # after the failures: those matter more
                self.line(text)
            for text in block_warning_annotations(outcomes):
                self.line(text)
        self.line(f"full block outputs: {output_dir}")
        self._recap(outcomes)
        for outcome in outcomes if len(outcomes) > 1 else ():
            self._verdict(outcome.plan.guide, [outcome], outcome.duration_s)
        if outcomes:
            name = outcomes[0].plan.guide if len(outcomes) == 1 else plural(len(outcomes), "guide")
            self._verdict(name, outcomes, sum(outcome.duration_s for outcome in outcomes))

    def _recap(self, outcomes: Sequence[GuideOutcome]) -> None:
        """One line per block that failed, mismatched, timed out or could not run: status, name, `file:line`, message,
        reason (the line ci.rehearsal's report rebuilds from results.json)."""
        failing = [result for outcome in outcomes for result in outcome.results if result.status.is_failure]
        if not failing:
            return
        self.line(f"{plural(len(failing), 'block')} did not pass:")
        for result in failing[:RECAP_LINES]:
            head, word, tail = did_not_pass_parts(
                status=result.status.value,
                name=result.step.name,
                where=_where(result),
                message=result.message,
                reason=result.reason,
            )
            self._write(self._painted(head, word, tail, status_colour(result.status)))
        if len(failing) > RECAP_LINES:
            self.line(f"  ... and {len(failing) - RECAP_LINES} more (results.json lists them all)")

    def _verdict(self, name: str, outcomes: Sequence[GuideOutcome], duration_s: float) -> None:
        """`=== NAME: PASSED|FAILED|INTERRUPTED|NOT_RUN (5 blocks: 4 passed, 1 skipped) in 3.2s`."""
        results = [result for outcome in outcomes for result in outcome.results]
        interrupted = any(outcome.interrupted_by for outcome in outcomes)
        failed = any(outcome.failed for outcome in outcomes)
        verdict = "INTERRUPTED" if interrupted else ("FAILED" if failed else "PASSED")
        if verdict == "PASSED" and results and all(result.status is Status.NOT_RUN for result in results):
            verdict = "NOT_RUN"  # a guide an interrupted run never got to
        prefix = "[ERROR] " if failed or interrupted else ""
        tally = block_tally(results)
        head, tail = clean_text(f"{prefix}=== {name}: "), clean_text(f" ({tally}) in {duration_s:.1f}s")
        self._write(head + self.palette.verdict(verdict) + tail)
