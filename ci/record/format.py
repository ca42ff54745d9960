"""results.json's format: its version, and the one codec between a block's `BlockResult` (with its `Attempt`s) and
its object in the file, which the writer and the reader share. docs/results.schema.json describes the file; tests
hold it to what this codec writes, key by key, and read back what it writes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, overload

from ci.base.text import clean_text, masked
from ci.guide.model import LANGUAGES, Label, Language, Load, Status, Step
from ci.record.outcome import (
    Attempt,
    BlockResult,
    BoundedText,
    Collection,
    DiagnosticResult,
    EarlierRun,
    PredatingFile,
    TrackedProcess,
)

__all__ = [
    "JSON",
    "READ_VERSIONS",
    "RECORD_FILE",
    "RECORD_VERSION",
    "attempt_from_json",
    "attempt_to_json",
    "block_from_json",
    "block_to_json",
    "collection_to_json",
    "diagnostic_to_json",
    "earlier_from_json",
    "earlier_to_json",
    "iso",
    "processes_from_json",
    "processes_to_json",
    "relative",
]

# The format's version, written into every record and checked on reading. Raise it with any change to
# the keys or their meaning, together with docs/results.schema.json (whose objects admit no other keys).
RECORD_VERSION = 6
# What this guide-guard's reader reads: version 2 only allowed ended_by "still running", which it does not read;
# version 3 only added each block's start_s, which a reader of an older record makes up from the durations;
# version 4 (what 0.2.0 writes) only added each block's reason, retry, retry_delay_s and attempts, files that
# predate the run, a guide's cleanup, resumed_from and each block's kept_from (null or absent in older records);
# version 5 only added each block's streams_merged (false in older records); version 6 only added each block's
# result_sha256 and loaded_sha256 (null and {} in older records: a resume cannot compare them, and says so) and
# warnings ([] in older records).
READ_VERSIONS = (1, 2, 3, 4, 5, 6)
RECORD_FILE = "results.json"  # in the run's output directory

JSON = dict[str, Any]  # one object of the file


# ---- to the file: paths relative to the output directory (BASE), text cleaned and masked as in the job log


@overload
def relative(path: str, base: Path) -> str: ...
@overload
def relative(path: str | None, base: Path) -> str | None: ...
def relative(path: str | None, base: Path) -> str | None:
    if path is None:
        return None
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path


def iso(epoch_s: float) -> str:
    """EPOCH_S as an ISO 8601 time in UTC, to the second: `2026-12-07T13:22:03+00:00`."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch_s))


def _whole(text: BoundedText | None, base: Path) -> JSON | None:
    """Where a text shown cut is whole, and its size; None for a text shown whole."""
    if text is None or text.complete:
        return None
    return {"path": relative(text.path, base), "bytes": text.size_bytes}


def block_to_json(result: BlockResult, guide: str, base: Path) -> JSON:
    step = result.step
    stored = result.stored[1] if result.stored else None
    return {
        "guide": guide,
        **step.identity(),
        "heading": clean_text(step.heading) if step.heading else None,
        "retry": step.retry,
        "retry_delay_s": step.retry_delay_s,
        "status": result.status.value,
        "message": clean_text(result.message),
        "reason": clean_text(result.reason) if result.reason is not None else None,
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 3),
        "start_s": round(result.start_s, 3) if result.start_s is not None else None,
        "captured": {result.stored[0]: clean_text(result.stored[1].shown)} if result.stored else {},
        "captured_whole": _whole(stored, base),
        "code_sha256": step.code_sha256,
        "result_sha256": step.result_sha256,
        "loaded_sha256": dict(result.loaded_sha256),
        "warnings": [clean_text(warning) for warning in result.warnings],
        "expected": clean_text(result.expected.shown) if result.expected is not None else None,
        "expected_whole": _whole(result.expected, base),
        "first_unmatched_line": result.match.first_unmatched_line if result.match else None,
        "failure_line": result.failure_line if result.status.is_failure else None,
        "stdout_path": relative(result.stdout_path, base),
        "stderr_path": relative(result.stderr_path, base),
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "streams_merged": step.merge_streams,
        "error_marker": result.marker_found,
        "stack_dumps": [relative(p, base) for p in result.dumps],
        "stack_dump_notes": [clean_text(n) for n in result.dump_notes],
        "processes_ended": processes_to_json(result.ended),
        "peak_rss_bytes": result.peak_rss_bytes,
        "cpu_s": round(result.cpu_s, 3) if result.cpu_s is not None else None,
        "diagnostics": [diagnostic_to_json(d, base) for d in result.diagnostics],
        "kept_from": earlier_to_json(result.kept_from),
        "attempts": [attempt_to_json(a, base) for a in result.attempts],
    }


def attempt_to_json(attempt: Attempt, base: Path) -> JSON:
    return {
        "attempt": attempt.number,
        "status": attempt.status.value,
        "message": clean_text(attempt.message),
        "exit_code": attempt.exit_code,
        "duration_s": round(attempt.duration_s, 3),
        "stdout_path": relative(attempt.stdout_path, base),
        "stderr_path": relative(attempt.stderr_path, base),
        "stdout_bytes": attempt.stdout_bytes,
        "stderr_bytes": attempt.stderr_bytes,
        "processes_ended": processes_to_json(attempt.ended),
        "stack_dumps": [relative(p, base) for p in attempt.dumps],
    }


def earlier_to_json(run: EarlierRun | None) -> JSON | None:
    return None if run is None else {"directory": masked(run.directory), "started_at": run.started_at}


def diagnostic_to_json(diagnostic: DiagnosticResult, base: Path) -> JSON:
    return {
        "command": clean_text(diagnostic.command),
        "output_path": relative(diagnostic.output_path, base),
        "output_bytes": diagnostic.output_bytes,
        "output_capped": diagnostic.output_capped,
        "exit_code": diagnostic.exit_code,
        "timed_out": diagnostic.timed_out,
        "duration_s": round(diagnostic.duration_s, 3),
        "message": clean_text(diagnostic.message),
        "predating_files": [{"path": masked(f.path), "modified_at": iso(f.modified_at)} for f in diagnostic.predating],
    }


def processes_to_json(processes: Iterable[TrackedProcess]) -> list[JSON]:
    return [
        {"pid": p.pid, "command": clean_text(p.command), "started_by": p.started_by, "ended_by": p.ended_by}
        for p in processes
    ]


# ---- from the file: paths absolute, taken in the record's DIRECTORY; keys newer than version 1 may be absent.
# KeyError, TypeError or ValueError when an object is not what the writer writes.


def _inside(directory: Path, path: str) -> str:
    """PATH of the record taken in DIRECTORY; ValueError when it leads out of it (an absolute path, `..`, a
    symbolic link): a record from elsewhere (a CI artifact) names no other file of this machine."""
    inside = directory / path
    if not inside.resolve().is_relative_to(directory.resolve()):
        raise ValueError(f"its path {path!r} leads out of {directory}, where the writer keeps every file")
    return str(inside)


def _file(directory: Path, path: str | None) -> str | None:
    return _inside(directory, path) if path else None


def _bounded(shown: str, whole: Mapping[str, Any] | None, directory: Path) -> BoundedText:
    """A text as recorded: whole (its size is the recorded text's), or its head and where it is whole."""
    if whole is None:
        return BoundedText(shown, len(shown.encode("utf-8")), complete=True)
    return BoundedText(shown, int(whole["bytes"]), complete=False, path=_file(directory, whole["path"]))


def block_from_json(raw: Mapping[str, Any], directory: Path) -> BlockResult:
    """A block as read back. The file holds no body, skip reason, `#test-result` as written nor mismatch report:
    the step's body is "" (its code_sha256 and result_sha256 are the recorded ones), its skip_reason and expected None, its language
    read from its word (shell when unknown), its rerun_on_resume False; `match` is None (`failure_line` is then
    the fence's line)."""
    word = str(raw.get("language", ""))
    captured: Mapping[str, str] = raw.get("captured") or {}
    expected = raw.get("expected")
    return BlockResult(
        step=Step(
            ordinal=int(raw["ordinal"]),
            label=Label(raw["label"]),
            id=raw.get("id"),
            store=raw.get("store"),
            language=LANGUAGES.get(word, Language.SHELL),
            language_word=word,
            body="",
            file=str(raw["guide"]),
            line=int(raw.get("line") or 0),
            heading=raw.get("heading"),
            hidden=bool(raw.get("hidden")),
            timeout_s=float(raw.get("timeout_s") or 0.0),
            loads=tuple(Load(name, placeholder) for name, placeholder in raw.get("loads") or ()),
            skip_reason=None,
            expected=None,
            retry=int(raw.get("retry") or 0),
            retry_delay_s=float(raw.get("retry_delay_s") or 0.0),
            merge_streams=bool(raw.get("streams_merged")),
            recorded_sha256=str(raw["code_sha256"]),
            recorded_result_sha256=raw.get("result_sha256"),
        ),
        status=Status(raw["status"]),
        exit_code=raw.get("exit_code"),
        duration_s=float(raw.get("duration_s") or 0.0),
        message=str(raw.get("message", "")),
        stdout_path=_file(directory, raw.get("stdout_path")),
        stderr_path=_file(directory, raw.get("stderr_path")),
        stdout_bytes=int(raw.get("stdout_bytes") or 0),
        stderr_bytes=int(raw.get("stderr_bytes") or 0),
        expected=None if expected is None else _bounded(expected, raw.get("expected_whole"), directory),
        match=None,
        stored=next(((k, _bounded(v, raw.get("captured_whole"), directory)) for k, v in captured.items()), None),
        marker_found=raw.get("error_marker"),
        dumps=tuple(_inside(directory, path) for path in raw.get("stack_dumps") or ()),
        dump_notes=tuple(raw.get("stack_dump_notes") or ()),
        ended=processes_from_json(raw.get("processes_ended") or ()),
        peak_rss_bytes=raw.get("peak_rss_bytes"),
        cpu_s=raw.get("cpu_s"),
        diagnostics=tuple(_diagnostic_from_json(d, directory) for d in raw.get("diagnostics") or ()),
        start_s=raw.get("start_s"),
        reason=raw.get("reason"),
        attempts=tuple(attempt_from_json(a, directory) for a in raw.get("attempts") or ()),
        kept_from=earlier_from_json(raw.get("kept_from")),
        loaded_sha256={str(name): str(digest) for name, digest in (raw.get("loaded_sha256") or {}).items()},
        warnings=tuple(str(warning) for warning in raw.get("warnings") or ()),
    )


def attempt_from_json(raw: Mapping[str, Any], directory: Path) -> Attempt:
    return Attempt(
        number=int(raw["attempt"]),
        status=Status(raw["status"]),
        exit_code=raw["exit_code"],
        duration_s=float(raw["duration_s"]),
        message=str(raw["message"]),
        stdout_path=_file(directory, raw["stdout_path"]),
        stderr_path=_file(directory, raw["stderr_path"]),
        stdout_bytes=int(raw["stdout_bytes"]),
        stderr_bytes=int(raw["stderr_bytes"]),
        ended=processes_from_json(raw["processes_ended"]),
        dumps=tuple(_inside(directory, path) for path in raw["stack_dumps"]),
    )


def earlier_from_json(raw: Mapping[str, Any] | None) -> EarlierRun | None:
    """A `resumed_from` or `kept_from` as read back; None for null (and in records older than version 4)."""
    return None if raw is None else EarlierRun(directory=str(raw["directory"]), started_at=str(raw["started_at"]))


def _diagnostic_from_json(raw: Mapping[str, Any], directory: Path) -> DiagnosticResult:
    from datetime import datetime  # reading a record back only

    return DiagnosticResult(
        command=str(raw["command"]),
        output_path=_file(directory, raw["output_path"]),
        output_bytes=int(raw["output_bytes"]),
        output_capped=bool(raw["output_capped"]),
        exit_code=raw["exit_code"],
        timed_out=bool(raw["timed_out"]),
        duration_s=float(raw["duration_s"]),
        message=str(raw["message"]),
        predating=tuple(
            PredatingFile(f["path"], datetime.fromisoformat(f["modified_at"]).timestamp())
            for f in raw.get("predating_files") or ()
        ),
    )


def processes_from_json(raw: Iterable[Mapping[str, Any]]) -> tuple[TrackedProcess, ...]:
    return tuple(
        TrackedProcess(int(p["pid"]), str(p["command"]), str(p["started_by"]), str(p["ended_by"])) for p in raw
    )


def collection_to_json(collection: Collection | None, base: Path) -> JSON | None:
    if collection is None:
        return None
    return {
        "directory": relative(collection.directory, base),
        "cap_bytes": collection.cap_bytes,
        "files": [
            {
                "pattern": masked(f.pattern),
                "source": masked(f.source),  # a block names the files it makes: a name may hold a secret
                "copied_to": _masked(relative(f.copied_to, base)),
                "size_bytes": f.size_bytes,
                "copied_bytes": f.copied_bytes,
                "truncated": f.truncated,
                "note": clean_text(f.note),
                "modified_at": None if f.modified_at is None else iso(f.modified_at),
                "predates_run": f.predates_run,
            }
            for f in collection.files
        ],
        "unmatched": [masked(pattern) for pattern in collection.unmatched],
        "files_left_out": collection.files_left_out,
        "notes": [clean_text(note) for note in collection.notes],
    }


def _masked(path: str | None) -> str | None:
    return None if path is None else masked(path)
