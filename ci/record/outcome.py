"""Named records of what became of a planned guide: each block's result, its attempts, diagnostics and collected files, the guide's outcome."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import field

from ci.base import frozen
from ci.guide.model import Plan, Status, Step

__all__ = [
    "STILL_RUNNING",
    "Attempt",
    "BlockResult",
    "BoundedText",
    "CollectedFile",
    "Collection",
    "DiagnosticResult",
    "Divergence",
    "EarlierRun",
    "GuideOutcome",
    "MatchReport",
    "PredatingFile",
    "TrackedProcess",
]


class Divergence(str, enum.Enum):
    """How an output departs from its expected body at the line a mismatch is blamed on."""

    DIFFERS = "differs"  # the output has a line there that does not match it
    MISSING = "missing"  # the output ends before it: nothing is left to match it
    EXTRA = "extra"  # it is the last expected line, and the output goes on after it


@frozen
class MatchReport:
    """Why an output did not match its expected body, as reports show it (its shown texts masked already)."""

    first_unmatched_line: int  # 1-based line of the expected body as matched (after substitution) that is to blame
    first_unmatched_text: str  # that line's text, unmasked: a message masks it before quoting it
    guide_line: int  # where that line is in the guide: in the #test-result as written (a loaded value: its placeholder)
    divergence: Divergence
    # DIFFERS: the output's line there; EXTRA: the first output line past the last expected one; MISSING: ""
    actual_line: str
    more_lines: int  # EXTRA: how many output lines follow actual_line; else 0
    # the output's line there, when it differs from the expected line only in what a log hides
    # (carriage returns, escape sequences, other control characters); None otherwise
    actual_line_hidden: str | None
    diff: str  # the unified-diff hunk around that line, wildcard lines folded, what a log hides written out
    expected_head: str  # the expected body as matched: whole, or its first lines
    expected_tail: str  # its last lines when expected_head is not all of it; else ""
    expected_lines: int  # how many lines the expected body has
    expected_path: str | None = None  # a file holding the whole expected body, when it is shown cut


STILL_RUNNING = "still running"  # TrackedProcess.ended_by of a process the harness could not end


@frozen
class TrackedProcess:
    """A process the run started that was still alive when a block or the run ended."""

    pid: int
    command: str
    started_by: str  # name of the block whose process tree it came from, "?" if not known
    ended_by: str  # the last signal sent to it, "SIGTERM" or "SIGKILL"; STILL_RUNNING if it outlived them


@frozen
class PredatingFile:
    """A file a report shows or names that was last modified before the guide started: maybe an earlier run's."""

    path: str  # absolute
    modified_at: float  # its last modification, seconds since the epoch


@frozen
class DiagnosticResult:
    """One `ci.diagnostics` command run after a failing block (or a `ci.cleanup` one), and what it printed."""

    command: str  # as the guide wrote it
    output_path: str | None  # its stdout and stderr together; None when it could not be started
    output_bytes: int
    output_capped: bool  # it printed up to the cap and was stopped there
    exit_code: int | None  # None when it timed out, was interrupted or never started
    timed_out: bool
    duration_s: float
    message: str  # one line: "exit 0", "timed out after 60s; its process tree was ended", ...
    # files its words name (`tail /tmp/server.log`) last modified before the guide started: what it showed may be old
    predating: tuple[PredatingFile, ...] = ()


@frozen
class BoundedText:
    """A text reports show bounded (a stored value, an expected body): whole when short, else its head."""

    shown: str  # the whole text, or its head (at most SHOWN_TEXT_BYTES, cut at no secret)
    size_bytes: int  # the whole text's size in UTF-8
    complete: bool  # `shown` is the whole text
    path: str | None = None  # for a text shown cut: a file holding it whole; None when there is none

    @property
    def whole(self) -> str | None:
        """The text when it is shown whole; None when only its head is."""
        return self.shown if self.complete else None


@frozen
class Attempt:
    """An earlier attempt of a block run more than once (`retry=`): one that failed or timed out, its files kept."""

    number: int  # 1-based: the first attempt is 1
    status: Status  # FAILED or TIMED_OUT: nothing else is retried
    exit_code: int | None  # None when it timed out or was killed by a signal
    duration_s: float
    message: str  # one line, as a block's ("exit 1", "timed out after 30s; ...")
    stdout_path: str | None  # its whole stdout, kept under an `.attempt-N.` name; None when it stayed empty
    stderr_path: str | None
    stdout_bytes: int
    stderr_bytes: int
    ended: tuple[TrackedProcess, ...] = ()  # what of it was left running and ended before the next attempt
    dumps: tuple[str, ...] = ()  # its stack dumps (a timed-out attempt's), kept under STEM.attempt-N.dumps


@frozen
class BlockResult:
    """What happened to one step: the status and everything a reporter may show.

    The same type is read back from results.json (ci.record.format.block_from_json) with what the file holds: there
    the step has no body (its code_sha256 is the recorded one) and `match` is None; paths are absolute."""

    step: Step
    status: Status
    exit_code: int | None  # None when the block never ran or was killed by a signal
    duration_s: float
    message: str  # one line for logs and JUnit ("exit 3", "mismatch at line 2", ...)
    stdout_path: str | None  # full stdout on disk
    stderr_path: str | None
    stdout_bytes: int
    stderr_bytes: int
    expected: BoundedText | None  # expected body after substitution (#test), as reports show it
    match: MatchReport | None  # set on a mismatch
    # (name, value as reports show it) for a setup with store; the whole value is held by the run alone
    stored: tuple[str, BoundedText] | None
    marker_found: str | None  # the first error marker seen in stderr (in the output, for merged streams)
    # paths of stack dumps taken on timeout (with those of the Python processes earlier blocks left running)
    dumps: tuple[str, ...] = ()
    # one line per dump that could not be taken, and per process earlier blocks left running: dumped too, or why not
    dump_notes: tuple[str, ...] = ()
    ended: tuple[TrackedProcess, ...] = ()  # processes the harness ended for it (timeout, interruption)
    peak_rss_bytes: int | None = None
    cpu_s: float | None = None
    diagnostics: tuple[DiagnosticResult, ...] = ()  # the guide's ci.diagnostics, run after a failure
    start_s: float | None = None  # seconds from the guide's start to the block's; None for a block never started
    # why it did not pass, beyond `message` (ci.runner.reason): the last line its output said so, then the guide's
    # warnings about it; masked and bounded. None for a block that passed, was skipped or not run, or said nothing
    reason: str | None = None
    attempts: tuple[Attempt, ...] = ()  # retry=: the attempts before this last one, each failed or timed out
    kept_from: EarlierRun | None = None  # a resumed run's block not run again: the run it passed in (SKIPPED)
    # {name: SHA-256 of the value} for each value the block loaded when it ran (Step.loaded_sha256), or, kept by a
    # resumed run, loaded in the run it passed in; {} for a block that loads nothing or never ran, and when read
    # back from a record older than version 6
    loaded_sha256: Mapping[str, str] = field(default_factory=dict)
    # what the log warns of about a block, though it may have passed: a stored value spanning lines or holding
    # progress output (ci.runner.stored); one line each, quoting no output
    warnings: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when the block passed in this run, or in the earlier run this one resumed and kept it from."""
        return self.status is Status.PASSED or (self.status is Status.SKIPPED and self.kept_from is not None)

    @property
    def captured(self) -> dict[str, str]:
        """{store name: value} for a setup that stored a value shown whole; {} for any other block (a value shown
        cut is no value to re-check with: the whole one may hold a secret the record masked)."""
        return {self.stored[0]: self.stored[1].shown} if self.stored and self.stored[1].complete else {}

    @property
    def printed(self) -> bool:
        """True when the block ran to its end with exit 0, so its stdout is what it really printed."""
        return self.status in (Status.PASSED, Status.MISMATCH)

    @property
    def failure_line(self) -> int:
        """The guide line every report names for this block: a mismatch's first failing expected line, else its fence."""
        return self.match.guide_line if self.match is not None else self.step.line


@frozen
class EarlierRun:
    """A run recorded in an output directory, as a resumed run names the run it continues (`--resume DIR`)."""

    directory: str  # its output directory, as the resumed run was given it (absolute)
    started_at: str  # ISO 8601, UTC: when its guide started, as its results.json says


@frozen
class CollectedFile:
    """One file matched by a `ci.collect` glob when the run ended."""

    pattern: str  # the glob as the guide wrote it
    source: str  # absolute path of the match
    copied_to: str | None  # absolute path of the copy; None when nothing could be copied
    size_bytes: int  # the source's size when the copy started (0 when unknown)
    copied_bytes: int
    truncated: bool  # only the last cap bytes were kept
    note: str  # "" when copied whole; else what happened (not a regular file, unreadable, grew meanwhile, ...)
    modified_at: float | None = None  # the source's last modification (epoch seconds) as copied; None when unknown
    predates_run: bool = False  # last modified before the guide started: maybe an earlier run's file, not this one's


@frozen
class Collection:
    """What `ci.collect` kept of one guide's files."""

    directory: str  # absolute path the copies went under
    cap_bytes: int  # at most this much of each file is kept: its end
    files: tuple[CollectedFile, ...]  # in the order the globs were given, each glob's matches sorted
    unmatched: tuple[str, ...]  # globs that matched no file
    files_left_out: int = 0  # matches beyond the file limit: neither copied nor listed
    notes: tuple[str, ...] = ()  # what cut it short: a glob's search stopped at its limit, a stop signal during it


@frozen
class GuideOutcome:
    """The finished run of one guide."""

    plan: Plan
    results: tuple[BlockResult, ...]  # one per step, in plan order
    leftovers: tuple[TrackedProcess, ...]  # processes ended at teardown
    interrupted_by: int | None  # signal number when the run was cancelled
    started_at: str  # ISO 8601, UTC
    duration_s: float
    collection: Collection | None = None  # the guide's ci.collect files, copied at its end
    cleanup: tuple[DiagnosticResult, ...] = ()  # the guide's ci.cleanup commands, run last; they change no verdict
    deadline_reached: bool = False  # --deadline left blocks of this guide not run

    @property
    def failed(self) -> bool:
        return self.deadline_reached or any(r.status.is_failure for r in self.results)
