"""What a reporter shows under a finished block: its output, expected and actual, dumps, ended processes, diagnostics."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from ci.base.streams import is_blank, read_view
from ci.base.text import FULL_LIMIT_BYTES, clean_text, human_size, plural, utf8_size
from ci.expect.examine import SHOWN_END_LINES, cut_line, head_and_tail_lines
from ci.guide.model import Label, Status
from ci.record.outcome import Attempt, BlockResult, BoundedText, DiagnosticResult, Divergence, MatchReport

__all__ = [
    "attempt_summary",
    "block_details",
    "cleanup_failed",
    "cleanup_sections",
    "command_shown",
    "earlier_attempts",
    "named_streams",
    "predating_note",
    "stream_files",
    "stream_sizes",
]

_Stream = TypeVar("_Stream")  # what names a stream: its path, its size
MERGED = "stdout and stderr merged"  # what reports add about a block whose two streams went into one file


def stream_sizes(result: BlockResult) -> str:
    """`stdout 10 B, stderr 2 B`; `output 12 B, stdout and stderr merged` for a block run with merged streams."""
    if result.step.merge_streams:
        return f"output {human_size(result.stdout_bytes)}, {MERGED}"
    return f"stdout {human_size(result.stdout_bytes)}, stderr {human_size(result.stderr_bytes)}"


def named_streams(merged: bool, stdout: _Stream, stderr: _Stream) -> dict[str, _Stream]:
    """{"stdout": STDOUT, "stderr": STDERR} as the heartbeat and --stream name them; {"output": STDOUT} for a block
    whose streams were merged into its stdout file."""
    return {"output": stdout} if merged else {"stdout": stdout, "stderr": stderr}


def stream_files(
    merged: bool, stdout: tuple[str | None, int], stderr: tuple[str | None, int]
) -> list[tuple[str, str, int]]:
    """(name, path, size) of each output file kept, STDOUT and STDERR being (path, size): a merged block's one file
    is its `output (stdout and stderr merged)`, and it has no stderr file of its own."""
    named = [(f"output ({MERGED})", *stdout)] if merged else [("stdout", *stdout), ("stderr", *stderr)]
    return [(name, path, size) for name, path, size in named if path is not None]


def block_details(result: BlockResult, *, verbose: bool = True, streamed: bool = False) -> list[tuple[str, str]]:
    """The sections shown under a finished block, as (title, untrusted text) pairs (spec section 7).

    The output read back from its files, and what is cut here, is masked by the
    run's policy already; the rest (the expected body, a stored value) is masked
    where it is written.
    With `verbose` False a passing block shows only what warns of trouble: its
    stderr when an error marker is in it. `streamed`: its output was shown live
    (--stream), so it is not shown again; a section names its files instead.
    """
    step = result.step
    if result.status in (Status.SKIPPED, Status.NOT_RUN):
        return []
    if not (verbose or result.status.is_failure):
        quiet = streamed or (result.marker_found is None and not _stderr_alone(result))
        # a stored value warned of (result.warnings) is shown: what the blocks loading it will get
        return ([] if quiet else _stream_sections(result)) + (_stored_sections(result) if result.warnings else [])
    sections: list[tuple[str, str]] = []
    if result.match is not None:  # the difference first, where a reader looks
        sections += _mismatch_sections(result, result.match, streamed)
    if not streamed:
        sections += _stream_sections(result, whole=result.status is Status.PASSED)
    if step.label is Label.TEST and result.expected is not None and result.match is None:
        sections.append(("expected", _shown(result.expected, "expected body")))
        if not streamed and not step.merge_streams:  # merged: the output section above shows it
            sections.append(("actual", read_view(result.stdout_path).render()))
    if streamed and (result.stdout_bytes or result.stderr_bytes):
        files = stream_files(
            step.merge_streams,
            (result.stdout_path, result.stdout_bytes),
            (result.stderr_path, result.stderr_bytes),
        )
        sections.append(("output (shown live above)", "\n".join(f"{name}: {path}" for name, path, _ in files)))
    sections += _stored_sections(result)
    if result.status is Status.TIMED_OUT:
        for path in result.dumps:
            dump = read_view(path, full_limit_bytes=FULL_LIMIT_BYTES)
            sections.append((f"stack dump {Path(path).name}", dump.render()))
        if result.dump_notes:
            sections.append(("stack dumps", "\n".join(result.dump_notes)))
    if result.ended:
        listed = "\n".join(
            f"pid {p.pid} ({p.ended_by}): {' '.join(clean_text(p.command).split())[:300]}" for p in result.ended
        )
        sections.append((f"processes ended ({len(result.ended)})", listed))
    if result.attempts:
        listed = "\n".join(attempt_summary(attempt, step.merge_streams) for attempt in result.attempts)
        last = f"this was attempt {len(result.attempts) + 1} of {step.retry + 1}"
        sections.append((f"earlier attempts ({last})", listed))
    sections += _diagnostic_sections(result.diagnostics)
    return sections


_ATTEMPT_MESSAGE_CHARS = (
    80  # an annotation or the step summary quotes at most this much of each earlier attempt's message
)


def earlier_attempts(result: BlockResult) -> str:
    """`exit 1; exit 1`: what each earlier attempt of a retried block ended with, on one line."""
    return "; ".join(attempt.message[:_ATTEMPT_MESSAGE_CHARS] for attempt in result.attempts)


def attempt_summary(attempt: Attempt, merged: bool) -> str:
    """`attempt 1: failed in 0.01s (exit 1); stdout: PATH (10 B); stderr: PATH (6 B)`: an earlier attempt on one line
    (MERGED: its block's streams went into one file, named `output (stdout and stderr merged)`)."""
    files = "".join(
        f"; {name}: {path} ({human_size(size)})"
        for name, path, size in stream_files(
            merged, (attempt.stdout_path, attempt.stdout_bytes), (attempt.stderr_path, attempt.stderr_bytes)
        )
    )
    ended = f"; {plural(len(attempt.ended), 'process', 'processes')} it left running ended" if attempt.ended else ""
    dumps = f"; stack dumps: {', '.join(attempt.dumps)}" if attempt.dumps else ""
    what = attempt.status.value.replace("_", " ")
    return f"attempt {attempt.number}: {what} in {attempt.duration_s:.2f}s ({attempt.message}){ended}{files or '; no output'}{dumps}"


def _stream_sections(result: BlockResult, *, whole: bool = False) -> list[tuple[str, str]]:
    """stderr (and a setup's stdout) when the block failed, holds an error marker, or wrote to stderr alone.

    `whole`: a passing block shown in full (-v, or its group under Actions): both
    streams whenever they hold something, so that its log holds what it printed;
    a setup's stored value stands for its stdout. A block whose streams were merged
    has one section for its one file, but for a mismatch, whose actual side shows it.
    """
    step = result.step
    noisy = whole or result.status.is_failure or result.marker_found is not None or _stderr_alone(result)
    if not noisy:
        return []
    if step.merge_streams:
        return _merged_section(result, whole)
    sections = []
    if result.marker_found is not None and result.stderr_bytes <= FULL_LIMIT_BYTES:
        stderr_view = read_view(result.stderr_path, full_limit_bytes=FULL_LIMIT_BYTES)
    else:
        stderr_view = read_view(result.stderr_path)
    marker = f", contains {result.marker_found!r}" if result.marker_found else ""
    if result.stderr_bytes:
        sections.append((f"stderr ({human_size(result.stderr_bytes)}{marker})", stderr_view.render()))
    stored = whole and result.stored is not None  # shown as the stored value below
    if step.label is Label.SETUP and result.stdout_bytes and not stored:  # a #test shows its stdout as "actual"
        sections.append((f"stdout ({human_size(result.stdout_bytes)})", read_view(result.stdout_path).render()))
    return sections


def _stored_sections(result: BlockResult) -> list[tuple[str, str]]:
    """`stored NAME (N bytes)` and the value, for a setup that stored one."""
    if result.stored is None:
        return []
    name, value = result.stored
    return [(f"stored {name} ({plural(value.size_bytes, 'byte')})", _shown(value, "value"))]


def _stderr_alone(result: BlockResult) -> bool:
    """Whether the block wrote to stderr alone: its stdout blank (empty, or only blanks and line ends), its stderr
    not. Its stderr is shown then, as the reference engine shows it, even for a block that passed: it is all the
    block said. A merged block has no stderr of its own."""
    if not result.stderr_bytes or not is_blank(result.stdout_path, result.stdout_bytes):
        return False
    return not is_blank(result.stderr_path, result.stderr_bytes)


def _merged_section(result: BlockResult, whole: bool) -> list[tuple[str, str]]:
    """The one output section of a block whose streams were merged; none when it is empty, its stored value stands
    for it, or a mismatch's actual side shows it."""
    if not result.stdout_bytes or result.match is not None or (whole and result.stored is not None):
        return []
    if result.marker_found is not None and result.stdout_bytes <= FULL_LIMIT_BYTES:  # as a stderr holding one
        view = read_view(result.stdout_path, full_limit_bytes=FULL_LIMIT_BYTES)
    else:
        view = read_view(result.stdout_path)
    marker = f", contains {result.marker_found!r}" if result.marker_found else ""
    return [(f"output ({human_size(result.stdout_bytes)}, {MERGED}{marker})", view.render())]


_SAID = {
    Divergence.DIFFERS: "",
    Divergence.MISSING: "; the output ends before it",
    Divergence.EXTRA: "; the last, and the output goes on after it",
}


def _mismatch_sections(result: BlockResult, match: MatchReport, streamed: bool) -> list[tuple[str, str]]:
    """A mismatch: the expected line blamed and where it is in the guide, the hunk around it, then both sides bounded
    (the actual side only when it was not shown live)."""
    where = f"{result.step.file}:{match.guide_line}"
    blamed = f"line {match.first_unmatched_line} of the expected output{_SAID[match.divergence]}"
    ends = f"first {SHOWN_END_LINES} and last {SHOWN_END_LINES} shown"
    empty = match.expected_lines == 1 and not match.expected_head  # an empty #test-result: nothing to print
    expected_title = "expected (empty: no output" if empty else f"expected ({_lines(match.expected_lines)}"
    expected_text = match.expected_head
    if match.expected_tail:
        whole = f"; the whole body is in {match.expected_path}" if match.expected_path else ""
        expected_title += f": {ends}{whole}"
        omitted = match.expected_lines - 2 * SHOWN_END_LINES
        expected_text += f"\n[... {_lines(omitted)} omitted ...]\n{match.expected_tail}"
    sections = [
        (f"first failing expected line, {where} ({blamed})", cut_line(clean_text(match.first_unmatched_text))),
        ("diff (- expected, + actual; lines a wildcard matched folded)", match.diff),
        (expected_title + ")", expected_text),
    ]
    return sections if streamed else [*sections, _actual_section(result, ends)]


def _actual_section(result: BlockResult, ends: str) -> tuple[str, str]:
    """The stdout of a mismatch: whole when short, else its first and last lines, and the file that holds it."""
    merged = f", {MERGED}" if result.step.merge_streams else ""
    if not result.stdout_bytes:
        return f"actual ({'output' if merged else 'stdout'} is empty{merged})", ""
    view = read_view(result.stdout_path, full_limit_bytes=FULL_LIMIT_BYTES)
    whole = f"; the whole {'output' if merged else 'stream'} is in {result.stdout_path}"
    if view.complete:
        head, tail, count = head_and_tail_lines(view.head)
        if not tail:
            return f"actual ({_lines(count)}{merged})", head
        omitted = _lines(count - 2 * SHOWN_END_LINES)
        return f"actual ({_lines(count)}{merged}: {ends}{whole})", f"{head}\n[... {omitted} omitted ...]\n{tail}"
    head = "\n".join(cut_line(line) for line in view.head.split("\n")[:SHOWN_END_LINES])
    tail = "\n".join(cut_line(line) for line in view.tail.split("\n")[-SHOWN_END_LINES:])
    size = human_size(result.stdout_bytes)
    return f"actual ({size}{merged}: {ends}{whole})", f"{head}\n[... the lines between omitted ...]\n{tail}"


def _lines(count: int) -> str:
    return plural(count, "line")


def _shown(text: BoundedText, what: str) -> str:
    """A stored value or an expected body as shown: whole, or its head and where the whole is."""
    if text.complete:
        return text.shown
    where = f"; the whole {what} is in {text.path}" if text.path else ""
    shown = f"first {human_size(utf8_size(text.shown))} of {human_size(text.size_bytes)}"
    return f"{text.shown}\n[... {what} cut: {shown} shown{where} ...]"


def predating_note(modified_at: float) -> str:
    """What reports say of a file last modified before the guide started (ci.runner.predating)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(modified_at))
    return f"last modified {when}, before this guide started: maybe an earlier run's"


def command_shown(command: str) -> str:
    """A guide's command on one line of a report: its first line, at most 120 characters, ` ...` when cut."""
    lines = command.strip().splitlines() or [""]
    return lines[0][:120] + (" ..." if len(lines) > 1 or len(lines[0]) > 120 else "")


def cleanup_failed(cleanup: DiagnosticResult) -> bool:
    """Whether a ci.cleanup command did not do its work: it did not exit 0 (it failed, timed out, never ran)."""
    return cleanup.exit_code != 0


def cleanup_sections(cleanup: Sequence[DiagnosticResult]) -> list[tuple[str, str]]:
    """A section for each ci.cleanup command that failed: what it printed, bounded as block output is."""
    sections = []
    for index, command in enumerate(cleanup, start=1):
        if cleanup_failed(command) and command.output_bytes:
            title = f"cleanup {index}/{len(cleanup)}: {command_shown(command.command)} (its output)"
            sections.append((title, read_view(command.output_path).render()))
    return sections


def _diagnostic_sections(diagnostics: Sequence[DiagnosticResult]) -> list[tuple[str, str]]:
    """One section per ci.diagnostics command: what it printed, bounded as block output is."""
    sections = []
    for index, diagnostic in enumerate(diagnostics, start=1):
        shown = command_shown(diagnostic.command)
        size = human_size(diagnostic.output_bytes)
        title = f"diagnostic {index}/{len(diagnostics)}: {shown} ({diagnostic.message}, {size} in {diagnostic.duration_s:.1f}s)"
        text = read_view(diagnostic.output_path).render() if diagnostic.output_bytes else "(no output)"
        sections.append((title, text))
        if diagnostic.predating:
            older = "\n".join(f"{clean_text(f.path)}: {predating_note(f.modified_at)}" for f in diagnostic.predating)
            sections.append((f"files diagnostic {index} names that predate this guide", older))
    return sections
