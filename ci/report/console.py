"""The job log: a header before each block, its verdict after, and the output that matters."""

from __future__ import annotations

import codecs
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ci.core.model import BlockResult, Collection, GuideOutcome, Problem, Status, Step
from ci.core.text import Masker, clean_text, human_size, partial_escape_start
from ci.report.details import block_details
from ci.report.github import StopCommands, escape_data, failure_annotations
from ci.report.tally import status_tally

__all__ = ["LIVE_LIMIT_BYTES", "ConsoleReporter", "collection_lines", "format_problems"]


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


def _verdict_line(result: BlockResult, total: int) -> str:
    step = result.step
    if result.status in (Status.SKIPPED, Status.NOT_RUN):
        return f"[{step.ordinal}/{total}] {step.name}: {result.status.value.upper()}: {result.message}"
    sizes = f"stdout {human_size(result.stdout_bytes)}, stderr {human_size(result.stderr_bytes)}"
    exit_text = "" if result.exit_code is None else f"exit {result.exit_code}, "
    text = f"[{step.ordinal}/{total}] {step.name}: {result.status.value.upper()} in {result.duration_s:.2f}s ({exit_text}{sizes})"
    if result.status.is_failure:
        return f"[ERROR] {text}: {result.message} ({step.file}:{result.failure_line})"
    return text


_COLLECTED_LINES = 30  # files listed in the log; results.json lists them all


def collection_lines(collection: Collection) -> list[str]:
    """The log's account of ci.collect: where the copies went, each file with its size, the cap and any trouble."""
    copied = [f for f in collection.files if f.copied_to is not None]
    lines = [
        f"collected {len(copied)} file{'s' if len(copied) != 1 else ''} (ci.collect, each capped at its last"
        f" {human_size(collection.cap_bytes)}) into {collection.directory}"
    ]
    for entry in collection.files[:_COLLECTED_LINES]:
        if entry.copied_to is None:
            lines.append(f"  {entry.source}: {entry.note}")  # not an [ERROR]: the guide's verdict stands
            continue
        size = human_size(entry.size_bytes)
        kept = f"last {human_size(entry.copied_bytes)} of {size} kept" if entry.truncated else size
        lines.append(f"  {entry.source} ({kept}){': ' + entry.note if entry.note else ''}")
    more = len(collection.files) - _COLLECTED_LINES + collection.files_left_out
    if more > 0:
        lines.append(f"  ... and {more} more (listed in results.json, but for any beyond the file limit)")
    lines += [f"  {pattern}: matched no file" for pattern in collection.unmatched]
    lines += [f"  {note}" for note in collection.notes]
    return lines


LIVE_LIMIT_BYTES = 8 * 1024 * 1024  # --stream shows this much of each stream of a block: a log is no place for GiBs
_READ_BYTES = 1 << 16  # one read of a followed file: memory stays bounded however fast a block writes


@dataclass
class _Followed:
    """One output file of a running block, and what of it is read but not shown yet."""

    name: str  # stdout or stderr
    path: Path
    decoder: codecs.IncrementalDecoder  # keeps a character split between two reads whole
    read_bytes: int = 0  # how much of the file is read
    raw: str = ""  # decoded text that may be the start of an escape sequence or a CRLF: cleaned once complete
    held: str = ""  # cleaned text that may be the start of a secret whose rest is not written yet
    stopped: bool = False  # its first LIVE_LIMIT_BYTES are read: the rest is left to the file


class _Tailer(threading.Thread):
    """--stream: copies a running block's output files to the console as they grow."""

    def __init__(self, paths: dict[str, Path], write: TextIO, masker: Masker) -> None:
        super().__init__(daemon=True)
        self.followed = [
            _Followed(name, path, codecs.getincrementaldecoder("utf-8")(errors="replace"))
            for name, path in paths.items()
        ]
        self.write = write
        self.masker = masker
        self.done = threading.Event()
        self.at_line_start = True  # whether what it wrote last ends a line

    def pump(self, *, last: bool = False) -> None:
        """Shows all that is written so far (up to the limit); LAST: the block has ended, show what is held too."""
        for stream in self.followed:
            if stream.stopped:
                continue
            self._read(stream)
            if stream.stopped:
                stream.raw = stream.held = (
                    ""  # what may begin a secret, an escape sequence or a CRLF: never shown in part
                )
                self._note(
                    f"[... live view of {stream.name} stopped after its first {human_size(LIVE_LIMIT_BYTES)};"
                    f" the whole stream is in {stream.path}]"
                )
            elif last:
                self._take(stream, b"", final=True)
        if last:
            self._unseen_notes()

    def _read(self, stream: _Followed) -> None:
        """Reads STREAM until caught up with the block or at the limit, in bounded reads."""
        try:
            with open(stream.path, "rb") as handle:
                handle.seek(stream.read_bytes)
                while chunk := handle.read(min(_READ_BYTES, LIVE_LIMIT_BYTES - stream.read_bytes)):
                    stream.read_bytes += len(chunk)
                    self._take(stream, chunk)
        except OSError:
            pass  # not created yet, or removed by the block: what was read is shown, the rest is in the report
        stream.stopped = stream.read_bytes >= LIVE_LIMIT_BYTES

    def _take(self, stream: _Followed, chunk: bytes, *, final: bool = False) -> None:
        """Shows what CHUNK completes of STREAM, holding back what may continue in the next read."""
        raw = stream.raw + stream.decoder.decode(chunk, final=final)
        complete = len(raw) if final else partial_escape_start(raw)
        stream.raw = raw[complete:]
        text = stream.held + clean_text(raw[:complete])
        cut = len(text) if final else self.masker.clear_cut(text, self.masker.partial_secret_start(text))
        stream.held = text[cut:]
        self._show(self.masker.mask(text[:cut]))

    def _unseen_notes(self) -> None:
        for stream in self.followed:
            try:
                unseen_bytes = stream.path.stat().st_size - stream.read_bytes if stream.stopped else 0
            except OSError:
                continue  # removed by the block: the note at the limit said where it was
            if unseen_bytes > 0:
                self._note(
                    f"[... {unseen_bytes} bytes of {stream.name} not shown live, after its first"
                    f" {human_size(LIVE_LIMIT_BYTES)}; the whole stream is in {stream.path}]"
                )

    def _show(self, text: str) -> None:
        if text:
            self.write.write(text)
            self.write.flush()
            self.at_line_start = text.endswith("\n")

    def _note(self, text: str) -> None:
        self._show(("" if self.at_line_start else "\n") + clean_text(text, self.masker) + "\n")

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.pump()
        self.pump(last=True)


class ConsoleReporter:
    """Writes the job log; under GitHub Actions adds groups, stop-commands and annotations."""

    def __init__(self, out: TextIO = sys.stdout, *, masker: Masker, github: bool = False, stream: bool = False) -> None:
        self.out = out
        self.masker = masker  # every line written goes through it
        self.github = github
        self.stream = stream
        self.stop = StopCommands()
        self.tailer: _Tailer | None = None
        self.group_open = False  # under Actions, a block's fold is open between its start and end
        self.holding = False  # while True, lines are flushed together (one write for a block's report)

    def line(self, text: str = "") -> None:
        self.out.write(clean_text(text, self.masker) + "\n")  # trusted text may quote the guide: cleaned too
        if not self.holding:
            self.out.flush()

    def untrusted(self, text: str) -> None:
        """Block output: never able to issue workflow commands."""
        text = clean_text(text, self.masker)
        self.line(self.stop.wrap(text) if self.github else text)

    def guide_started(self, guide: str, steps: int) -> None:
        self.line(f"=== {guide}: {steps} blocks")

    def block_started(self, step: Step, total: int, stdout_path: Path, stderr_path: Path) -> None:
        header = _header(step, total)
        self.line(f"::group::{escape_data(header)}" if self.github else f"==> {header}")
        self.group_open = self.github
        if self.stream:
            if self.github:
                self.line(self.stop.stop_line)
            self.tailer = _Tailer({"stdout": stdout_path, "stderr": stderr_path}, self.out, self.masker)
            self.tailer.start()

    def block_finished(self, result: BlockResult, total: int) -> None:
        self.holding = True
        try:
            self._block_report(result, total)
        finally:
            self.holding = False
            self.out.flush()

    def _block_report(self, result: BlockResult, total: int) -> None:
        if self.tailer is not None:
            self.tailer.done.set()
            self.tailer.join()
            if not self.tailer.at_line_start:  # `printf 100%`: the resume line is seen only at a line start
                self.out.write("\n")
            self.tailer = None
            if self.github:
                self.line(self.stop.resume_line)
        sections = block_details(result, masker=self.masker)
        if self.group_open and not result.status.is_failure:
            self._sections(sections)
        if self.group_open:
            self.line("::endgroup::")
            self.group_open = False
        if not self.github or result.status.is_failure:  # failures stay outside the fold, where readers look
            self._sections(sections)
        self.line(_verdict_line(result, total))

    def _sections(self, sections: list[tuple[str, str]]) -> None:
        for title, text in sections:
            self.line(f"--- {title}")
            self.untrusted(text)

    def guide_finished(self, outcome: GuideOutcome) -> None:
        tally = status_tally(outcome.results) or "no blocks"
        if outcome.leftovers:
            self.line("processes still running at the end of the run, now ended:")
            for proc in outcome.leftovers:
                self.line(f"  pid {proc.pid} (from block {proc.started_by}, {proc.ended_by}): ")
                self.untrusted(f"    {clean_text(proc.command, self.masker)[:300]}")  # masked, then cut
        if outcome.collection is not None:
            for text in collection_lines(outcome.collection):
                self.line(text)
        verdict = "INTERRUPTED" if outcome.interrupted_by else ("FAILED" if outcome.failed else "PASSED")
        prefix = "[ERROR] " if outcome.failed or outcome.interrupted_by else ""
        self.line(f"{prefix}=== {outcome.plan.guide}: {verdict} ({tally}) in {outcome.duration_s:.1f}s")

    def run_finished(self, outcomes: Sequence[GuideOutcome], output_dir: Path) -> None:
        if self.github:
            for text in failure_annotations(outcomes, masker=self.masker):
                self.line(text)
        self.line(f"full block outputs: {output_dir}")
