"""results.json's format: its version and one TypedDict per object, shared by the writer and the reader."""

from __future__ import annotations

from typing import TypedDict

from ci.guide.model import (
    StepIdentity,
)

__all__ = [
    "READ_VERSIONS",
    "RECORD_FILE",
    "RECORD_VERSION",
    "AttemptRecord",
    "BlockRecord",
    "CollectedFileRecord",
    "CollectionRecord",
    "DiagnosticRecord",
    "EarlierRunRecord",
    "GuideRecord",
    "PredatingFileRecord",
    "ProcessRecord",
    "RunRecord",
    "WholeTextRecord",
]

# The format's version, written into every record and checked on reading. Raise it with any change to
# the keys or their meaning, together with docs/results.schema.json (whose objects admit no other keys).
RECORD_VERSION = 5
# What this guide-guard's reader reads: version 2 only allowed ended_by "still running", which it does not read;
# version 3 only added each block's start_s, which a reader of an older record makes up from the durations;
# version 4 only added what it does not read (each block's reason, retry, retry_delay_s and attempts, files that
# predate the run, a guide's cleanup) and resumed_from and each block's kept_from (null in older records); version 5
# only added each block's streams_merged (false in older records).
READ_VERSIONS = (1, 2, 3, 4, 5)
RECORD_FILE = "results.json"  # in the run's output directory

# ---- the format: one TypedDict per object of the file, so that writer and reader share the key names


class ProcessRecord(TypedDict):
    """A process the harness ended, or tried to."""

    pid: int
    command: str
    started_by: str  # the block whose process tree it came from
    ended_by: str  # "SIGTERM" or "SIGKILL"; "still running" if it outlived both (since version 2)


class PredatingFileRecord(TypedDict):
    """A file a diagnostic names that was last modified before the guide started (since version 4)."""

    path: str
    modified_at: str  # ISO 8601, UTC


class AttemptRecord(TypedDict):
    """An earlier attempt of a retried block: it failed or timed out, and the block ran again (since version 4)."""

    attempt: int  # 1-based
    status: str  # "failed" or "timed_out"
    message: str
    exit_code: int | None
    duration_s: float
    stdout_path: str | None  # relative to the output directory; None for a stream that stayed empty
    stderr_path: str | None
    stdout_bytes: int
    stderr_bytes: int
    processes_ended: list[ProcessRecord]  # what it left running, ended before the next attempt
    stack_dumps: list[str]  # a timed-out attempt's stack dumps, relative to the output directory


class DiagnosticRecord(TypedDict):
    """One of the guide's `ci.diagnostics`, run after a block failed."""

    command: str
    output_path: str | None  # relative to the output directory
    output_bytes: int
    output_capped: bool
    exit_code: int | None
    timed_out: bool
    duration_s: float
    message: str
    predating_files: list[PredatingFileRecord]  # files its words name, last modified before the guide started (v4)


class CollectedFileRecord(TypedDict):
    """One file matched by a `ci.collect` glob."""

    pattern: str
    source: str
    copied_to: str | None  # relative to the output directory
    size_bytes: int
    copied_bytes: int
    truncated: bool
    note: str
    modified_at: str | None  # the source's last modification, ISO 8601 UTC; None when unknown (since version 4)
    predates_run: bool  # last modified before the guide started: maybe an earlier run's (since version 4)


class CollectionRecord(TypedDict):
    """The guide's `ci.collect` files, copied when it ended."""

    directory: str
    cap_bytes: int
    files: list[CollectedFileRecord]
    unmatched: list[str]
    files_left_out: int
    notes: list[str]


class EarlierRunRecord(TypedDict):
    """A run recorded in another output directory: the run a resumed run continues (since version 4)."""

    directory: str  # its output directory, absolute, as the resumed run was given it
    started_at: str  # ISO 8601, UTC: its guide's started_at


class GuideRecord(TypedDict):
    """One guide of the run."""

    guide: str
    started_at: str  # ISO 8601, UTC
    duration_s: float
    failed: bool
    interrupted_by_signal: int | None
    processes_ended: list[ProcessRecord]  # at teardown
    collected: CollectionRecord | None
    cleanup: list[DiagnosticRecord]  # the guide's ci.cleanup commands, run last (since version 4)


class WholeTextRecord(TypedDict):
    """Where a stored value or an expected body that results.json shows cut is whole."""

    path: str | None  # relative to the output directory; None when it could not be kept
    bytes: int  # its whole size in UTF-8


class BlockRecord(StepIdentity):
    """One runnable block of the run; its identity keys come from `Step.identity`."""

    guide: str
    heading: str | None
    retry: int  # more attempts after one that failed or timed out (since version 4)
    retry_delay_s: float  # the pause before each
    status: str  # a Status's value
    message: str
    reason: str | None  # why it did not pass, beyond message (BlockResult.reason); None when passed (since 4)
    exit_code: int | None
    duration_s: float
    start_s: float | None  # seconds from the guide's started_at to the block's start; None if never started (since 3)
    captured: dict[str, str]  # {store name: value} for a setup that stored; its head when captured_whole is set
    captured_whole: WholeTextRecord | None  # set when `captured` shows only the head of a long value
    code_sha256: str  # Step.code_sha256
    expected: str | None  # its head when expected_whole is set
    expected_whole: WholeTextRecord | None  # set when `expected` shows only the head of a long body
    first_unmatched_line: (
        int | None
    )  # a mismatch: the line blamed, in the expected body as matched (after substitution)
    failure_line: int | None  # a failure: the guide line reports name (a mismatch: first_unmatched_line as written)
    stdout_path: str | None  # relative to the output directory; None for a stream that stayed empty
    stderr_path: str | None
    stdout_bytes: int
    stderr_bytes: int
    # stderr went into the stdout file, interleaved as written (the fences dialect): stdout_path and stdout_bytes
    # are the block's whole output, stderr_path is null and stderr_bytes 0 (since version 5)
    streams_merged: bool
    error_marker: str | None  # in stderr; in the one output file when streams_merged
    stack_dumps: list[str]
    stack_dump_notes: list[str]
    processes_ended: list[ProcessRecord]
    peak_rss_bytes: int | None
    cpu_s: float | None
    diagnostics: list[DiagnosticRecord]
    attempts: list[AttemptRecord]  # the earlier attempts of a retried block, in order; [] when run once (since 4)
    kept_from: EarlierRunRecord | None  # status skipped: it passed in that run, which this one resumed (since 4)


class RunRecord(TypedDict):
    """The whole file."""

    version: int  # RECORD_VERSION
    exit_status: int
    harness_peak_rss_bytes: int
    resumed_from: EarlierRunRecord | None  # the run this one continued (--resume DIR); None for a whole run
    guides: list[GuideRecord]
    blocks: list[BlockRecord]  # every guide's, in run order


# ---- writing
