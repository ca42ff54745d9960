"""Writing results.json from the finished outcomes of a run."""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import overload

from ci.base.files import write_atomically
from ci.base.text import Masker, clean_text, escape_undecodable_json, policy
from ci.record.format import (
    RECORD_VERSION,
    AttemptRecord,
    BlockRecord,
    CollectionRecord,
    DiagnosticRecord,
    EarlierRunRecord,
    ProcessRecord,
    RunRecord,
    WholeTextRecord,
)
from ci.record.outcome import (
    Attempt,
    BlockResult,
    BoundedText,
    Collection,
    DiagnosticResult,
    EarlierRun,
    GuideOutcome,
    TrackedProcess,
)

__all__ = ["run_record", "write_record"]


@overload
def _relative(path: str, base: Path) -> str: ...
@overload
def _relative(path: str | None, base: Path) -> str | None: ...
def _relative(path: str | None, base: Path) -> str | None:
    if path is None:
        return None
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path


def _whole(text: BoundedText | None, base: Path) -> WholeTextRecord | None:
    """Where a text shown cut is whole, and its size; None for a text shown whole."""
    if text is None or text.complete:
        return None
    return {"path": _relative(text.path, base), "bytes": text.size_bytes}


def _block(result: BlockResult, guide: str, base: Path, masker: Masker) -> BlockRecord:
    step = result.step
    stored = result.stored[1] if result.stored else None
    return {
        "guide": guide,
        **step.identity(),
        "heading": clean_text(step.heading, masker) if step.heading else None,
        "retry": step.retry,
        "retry_delay_s": step.retry_delay_s,
        "status": result.status.value,
        "message": clean_text(result.message, masker),
        "reason": clean_text(result.reason, masker) if result.reason is not None else None,
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 3),
        "start_s": round(result.start_s, 3) if result.start_s is not None else None,
        "captured": {result.stored[0]: clean_text(result.stored[1].shown, masker)} if result.stored else {},
        "captured_whole": _whole(stored, base),
        "code_sha256": step.code_sha256,
        "expected": clean_text(result.expected.shown, masker) if result.expected is not None else None,
        "expected_whole": _whole(result.expected, base),
        "first_unmatched_line": result.match.first_unmatched_line if result.match else None,
        "failure_line": result.failure_line if result.status.is_failure else None,
        "stdout_path": _relative(result.stdout_path, base),
        "stderr_path": _relative(result.stderr_path, base),
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "streams_merged": step.merge_streams,
        "error_marker": result.marker_found,
        "stack_dumps": [_relative(p, base) for p in result.dumps],
        "stack_dump_notes": [clean_text(n, masker) for n in result.dump_notes],
        "processes_ended": _processes(result.ended, masker),
        "peak_rss_bytes": result.peak_rss_bytes,
        "cpu_s": round(result.cpu_s, 3) if result.cpu_s is not None else None,
        "diagnostics": [_diagnostic(d, base, masker) for d in result.diagnostics],
        "kept_from": _earlier(result.kept_from, masker),
        "attempts": [_attempt(a, base, masker) for a in result.attempts],
    }


def _attempt(attempt: Attempt, base: Path, masker: Masker) -> AttemptRecord:
    return {
        "attempt": attempt.number,
        "status": attempt.status.value,
        "message": clean_text(attempt.message, masker),
        "exit_code": attempt.exit_code,
        "duration_s": round(attempt.duration_s, 3),
        "stdout_path": _relative(attempt.stdout_path, base),
        "stderr_path": _relative(attempt.stderr_path, base),
        "stdout_bytes": attempt.stdout_bytes,
        "stderr_bytes": attempt.stderr_bytes,
        "processes_ended": _processes(attempt.ended, masker),
        "stack_dumps": [_relative(p, base) for p in attempt.dumps],
    }


def _earlier(run: EarlierRun | None, masker: Masker) -> EarlierRunRecord | None:
    return None if run is None else {"directory": masker.mask(run.directory), "started_at": run.started_at}


def _diagnostic(diagnostic: DiagnosticResult, base: Path, masker: Masker) -> DiagnosticRecord:
    return {
        "command": clean_text(diagnostic.command, masker),
        "output_path": _relative(diagnostic.output_path, base),
        "output_bytes": diagnostic.output_bytes,
        "output_capped": diagnostic.output_capped,
        "exit_code": diagnostic.exit_code,
        "timed_out": diagnostic.timed_out,
        "duration_s": round(diagnostic.duration_s, 3),
        "message": clean_text(diagnostic.message, masker),
        "predating_files": [
            {"path": masker.mask(f.path), "modified_at": _iso(f.modified_at)} for f in diagnostic.predating
        ],
    }


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="seconds")


def _collection(collection: Collection | None, base: Path, masker: Masker) -> CollectionRecord | None:
    if collection is None:
        return None
    return {
        "directory": _relative(collection.directory, base),
        "cap_bytes": collection.cap_bytes,
        "files": [
            {
                "pattern": masker.mask(f.pattern),
                "source": masker.mask(f.source),  # a block names the files it makes: a name may hold a secret
                "copied_to": _masked(_relative(f.copied_to, base), masker),
                "size_bytes": f.size_bytes,
                "copied_bytes": f.copied_bytes,
                "truncated": f.truncated,
                "note": clean_text(f.note, masker),
                "modified_at": None if f.modified_at is None else _iso(f.modified_at),
                "predates_run": f.predates_run,
            }
            for f in collection.files
        ],
        "unmatched": [masker.mask(pattern) for pattern in collection.unmatched],
        "files_left_out": collection.files_left_out,
        "notes": [clean_text(note, masker) for note in collection.notes],
    }


def _masked(path: str | None, masker: Masker) -> str | None:
    return None if path is None else masker.mask(path)


def _processes(processes: Sequence[TrackedProcess], masker: Masker) -> list[ProcessRecord]:
    return [
        {"pid": p.pid, "command": clean_text(p.command, masker), "started_by": p.started_by, "ended_by": p.ended_by}
        for p in processes
    ]


def _own_peak_rss_bytes() -> int:
    """The harness's peak resident memory since it started.

    VmHWM, not getrusage: Linux carries ru_maxrss across exec, so a harness
    forked from a big process (a test runner) would report its parent's size.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def run_record(
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    base: Path,
    *,
    resumed_from: EarlierRun | None = None,
) -> RunRecord:
    """The run record: every block of every guide, plus per-guide verdicts and leftovers, and the run it resumed;
    what it quotes of the run (output, names, paths) masked by the run's policy."""
    masker = policy()
    return {
        "version": RECORD_VERSION,
        "exit_status": int(exit_status),  # the number, not the ExitCode member the run may pass
        "harness_peak_rss_bytes": _own_peak_rss_bytes(),
        "resumed_from": _earlier(resumed_from, masker),
        "guides": [
            {
                "guide": o.plan.guide,
                "started_at": o.started_at,
                "duration_s": round(o.duration_s, 3),
                "failed": o.failed,
                "interrupted_by_signal": o.interrupted_by,
                "processes_ended": _processes(o.leftovers, masker),
                "collected": _collection(o.collection, base, masker),
                "cleanup": [_diagnostic(c, base, masker) for c in o.cleanup],
            }
            for o in outcomes
        ],
        "blocks": [_block(r, o.plan.guide, base, masker) for o in outcomes for r in o.results],
    }


def write_record(
    path: Path,
    outcomes: Sequence[GuideOutcome],
    exit_status: int,
    *,
    resumed_from: EarlierRun | None = None,
) -> None:
    """Write the run record to `path`, whole or not at all; paths in it are relative to `path`'s directory.

    A name from the OS that is not UTF-8 (a guide's file name, a collected
    file's) is recorded with those bytes as `\\xNN`: the file stays UTF-8.
    """
    record = run_record(outcomes, exit_status, path.parent, resumed_from=resumed_from)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One line per block: readable, and json's fast C encoder works only without indent.
    head = json.dumps({key: value for key, value in record.items() if key != "blocks"}, indent=2, ensure_ascii=False)
    blocks = record["blocks"]
    lines = ",\n".join("    " + json.dumps(block, ensure_ascii=False) for block in blocks)
    text = head[:-2] + (',\n  "blocks": [\n' + lines + "\n  ]\n}\n" if blocks else ',\n  "blocks": []\n}\n')
    write_atomically(path, escape_undecodable_json(text))


# ---- reading
