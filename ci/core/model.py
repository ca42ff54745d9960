"""Named records passed between the stages: blocks, plans, results and outcomes."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

__all__ = [
    "STILL_RUNNING",
    "Attempt",
    "Block",
    "BlockResult",
    "BoundedText",
    "CollectedFile",
    "Collection",
    "DiagnosticResult",
    "Divergence",
    "DocumentError",
    "EarlierRun",
    "Expected",
    "GuideOutcome",
    "GuideSettings",
    "Label",
    "Language",
    "Load",
    "MatchReport",
    "Param",
    "Plan",
    "PredatingFile",
    "Problem",
    "Status",
    "Step",
    "StepIdentity",
    "TrackedProcess",
    "naming",
    "naming_words",
]


class Label(str, enum.Enum):
    """The three labels of the contract, spelt as guides write them."""

    TEST = "#test"
    RESULT = "#test-result"
    SETUP = "#test-setup"


class Language(str, enum.Enum):
    """How a runnable block's body is run."""

    SHELL = "shell"
    PYTHON = "python"


class Status(str, enum.Enum):
    """What became of one block; every reporter must handle each member."""

    PASSED = "passed"
    FAILED = "failed"
    MISMATCH = "mismatch"
    TIMED_OUT = "timed_out"
    ERROR = "error"
    SKIPPED = "skipped"
    NOT_RUN = "not_run"

    @property
    def is_failure(self) -> bool:
        """True for the statuses that make the run exit 1."""
        return self in (Status.FAILED, Status.MISMATCH, Status.TIMED_OUT, Status.ERROR)


@dataclass(frozen=True)
class Problem:
    """One document error (or warning), located in the guide."""

    file: str  # the guide as the user named it (path or URL)
    line: int  # 1-based source line; 0 when the whole file is concerned
    message: str  # the rule broken and how to fix it

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


class DocumentError(Exception):
    """The guide (or the command line naming its blocks) is wrong: nothing runs, exit 2."""

    def __init__(self, problems: list[Problem], warnings: tuple[Problem, ...] = ()) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems  # every problem found, in source order
        self.warnings = warnings  # found in the same guide: the author fixes both in one go


@dataclass(frozen=True)
class Param:
    """One parameter of a label as written: `key="value"` or a bare flag."""

    key: str
    value: str | None  # None for a flag such as disable_fuzzy
    column: int  # 0-based offset in the info string, for messages
    quoted: bool = True  # False for `key=value` written bare: a document error, but the value is still read


@dataclass(frozen=True)
class Block:
    """One labelled fence as parsed, before any validation."""

    label: Label
    language: str | None  # the word before the label, as written
    params: tuple[Param, ...]  # the words after the label, in order
    body: str  # fence content with trailing newlines removed
    file: str  # the guide as the user named it
    line: int  # 1-based line of the opening fence
    heading: str | None  # text of the nearest heading above the block
    hidden: bool  # True when the fence sits inside an HTML comment


def naming(block_id: str | None, store: str | None) -> tuple[tuple[str, str], ...]:
    """What names a block, most telling first: ("id", ID), then ("store", NAME); () for neither.

    The one rule for naming a block in reports: by its id, else by the name it stores, else by its
    place (an ordinal or a line, which the caller knows). A report that names a block once takes the
    first; `--list` shows both.
    """
    return tuple((key, value) for key, value in (("id", block_id), ("store", store)) if value)


def naming_words(block_id: str | None, store: str | None) -> tuple[str, ...]:
    """`naming` as the parameters are written: `id=ID`, `store=NAME`."""
    return tuple(f"{key}={value}" for key, value in naming(block_id, store))


@dataclass(frozen=True)
class Load:
    """One `load="NAME>>PH"`: replace `<PH>` by the value stored as NAME."""

    name: str
    placeholder: str


@dataclass(frozen=True)
class Expected:
    """The `#test-result` paired with a `#test`."""

    body: str  # as written, trailing newlines removed, before substitution
    fuzzy: tuple[str, ...]  # wildcard tokens in effect; () with disable_fuzzy
    loads: tuple[Load, ...]  # substitutions applied to the body before matching
    line: int  # 1-based line of the result's opening fence


class StepIdentity(TypedDict):
    """What names and places a runnable block, under the keys `--list --format json` and results.json use."""

    ordinal: int
    label: str  # a Label's value
    id: str | None
    store: str | None
    language: str  # as written
    line: int
    timeout_s: float
    loads: list[list[str]]  # [NAME, PLACEHOLDER] pairs
    hidden: bool


@dataclass(frozen=True)
class Step:
    """One runnable block (`#test` or `#test-setup`) of a validated plan."""

    ordinal: int  # 1-based position among runnable blocks
    label: Label  # TEST or SETUP
    id: str | None
    store: str | None  # setups only: the name its stdout is stored under
    language: Language
    language_word: str  # the language as written (shell, bash, python3, ...)
    body: str  # as written, before substitution
    file: str
    line: int
    heading: str | None
    hidden: bool
    timeout_s: float  # resolved: block, else front matter, else command line
    loads: tuple[Load, ...]
    skip_reason: str | None  # from skip='...'
    expected: Expected | None  # `#test` only
    retry: int = 0  # resolved (block, else front matter): attempts after a first that failed or timed out
    retry_delay_s: float = 0.0  # resolved: the pause before each further attempt
    rerun_on_resume: bool = False  # the rerun_on_resume flag: a resumed run runs it again even though it passed

    @property
    def name(self) -> str:
        """The id, else the store, else the ordinal: how logs and JUnit name a block."""
        return next((value for _, value in naming(self.id, self.store)), f"#{self.ordinal}")

    @property
    def named_by(self) -> tuple[str, ...]:
        """The parameters that name the block as written (`id=ID`, `store=NAME`), most telling first."""
        return naming_words(self.id, self.store)

    @property
    def code_sha256(self) -> str:
        """SHA-256 of the body as written: tells whether a recorded run ran the command the guide holds now."""
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()

    def identity(self) -> StepIdentity:
        """What names and places the block, as `--list --format json` and results.json show it."""
        return {
            "ordinal": self.ordinal,
            "label": self.label.value,
            "id": self.id,
            "store": self.store,
            "language": self.language_word,
            "line": self.line,
            "timeout_s": self.timeout_s,
            "loads": [[load.name, load.placeholder] for load in self.loads],
            "hidden": self.hidden,
        }


@dataclass(frozen=True)
class GuideSettings:
    """Guide-wide settings from the front matter's `ci:` mapping."""

    timeout_s: float | None = None  # default per-block limit
    error_markers: tuple[str, ...] = ()  # added to the default markers
    env: Mapping[str, str] = field(default_factory=dict)  # added to every block's environment
    upstream: Mapping[str, str] = field(default_factory=dict)  # read by the monitor
    collect: tuple[str, ...] = ()  # globs of files copied into OUTPUT_DIR/collected/ when the run ends
    diagnostics: tuple[str, ...] = ()  # bash commands run after a block fails, mismatches or times out
    diagnostics_timeout_s: float | None = None  # each diagnostic's limit; None: the harness's default
    cleanup: tuple[str, ...] = ()  # bash commands run when the guide's run ends, whatever its verdict
    cleanup_timeout_s: float | None = None  # each cleanup command's limit; None: the harness's default
    retry: int | None = None  # ci.retry: every runnable block's retries unless it gives its own; None: 0
    retry_delay_s: float | None = None  # ci.retry_delay: the pause before each; None: DEFAULT_RETRY_DELAY_S


@dataclass(frozen=True)
class Plan:
    """A validated guide: what will run, in order. Built only when there is no document error."""

    guide: str  # the guide as the user named it (path or URL)
    source_path: str | None  # local path for annotations; None for URLs
    steps: tuple[Step, ...]
    settings: GuideSettings
    warnings: tuple[Problem, ...] = ()  # suspicious but legal text (a `#tset` typo)


class Divergence(str, enum.Enum):
    """How an output departs from its expected body at the line a mismatch is blamed on."""

    DIFFERS = "differs"  # the output has a line there that does not match it
    MISSING = "missing"  # the output ends before it: nothing is left to match it
    EXTRA = "extra"  # it is the last expected line, and the output goes on after it


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TrackedProcess:
    """A process the run started that was still alive when a block or the run ended."""

    pid: int
    command: str
    started_by: str  # name of the block whose process tree it came from, "?" if not known
    ended_by: str  # the last signal sent to it, "SIGTERM" or "SIGKILL"; STILL_RUNNING if it outlived them


@dataclass(frozen=True)
class PredatingFile:
    """A file a report shows or names that was last modified before the guide started: maybe an earlier run's."""

    path: str  # absolute
    modified_at: float  # its last modification, seconds since the epoch


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class BoundedText:
    """A text reports show bounded (a stored value, an expected body): whole when short, else its head."""

    shown: str  # the whole text, or its head (at most SHOWN_TEXT_BYTES, cut at no secret)
    size_bytes: int  # the whole text's size in UTF-8
    complete: bool  # `shown` is the whole text
    path: str | None = None  # for a text shown cut: a file holding it whole; None when there is none


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class BlockResult:
    """What happened to one step: the status and everything a reporter may show."""

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
    marker_found: str | None  # the first error marker seen in stderr
    dumps: tuple[str, ...] = ()  # paths of stack dumps taken on timeout
    dump_notes: tuple[str, ...] = ()  # one line per dump that could not be taken
    ended: tuple[TrackedProcess, ...] = ()  # processes the harness ended for it (timeout, interruption)
    peak_rss_bytes: int | None = None
    cpu_s: float | None = None
    diagnostics: tuple[DiagnosticResult, ...] = ()  # the guide's ci.diagnostics, run after a failure
    start_s: float | None = None  # seconds from the guide's start to the block's; None for a block never started
    # why it did not pass, beyond `message` (ci.core.reason): the last line its output said so, then the guide's
    # warnings about it; masked and bounded. None for a block that passed, was skipped or not run, or said nothing
    reason: str | None = None
    attempts: tuple[Attempt, ...] = ()  # retry=: the attempts before this last one, each failed or timed out
    kept_from: EarlierRun | None = None  # a resumed run's block not run again: the run it passed in (SKIPPED)

    @property
    def failure_line(self) -> int:
        """The guide line every report names for this block: a mismatch's first failing expected line, else its fence."""
        return self.match.guide_line if self.match is not None else self.step.line


@dataclass(frozen=True)
class EarlierRun:
    """A run recorded in an output directory, as a resumed run names the run it continues (`--resume DIR`)."""

    directory: str  # its output directory, as the resumed run was given it (absolute)
    started_at: str  # ISO 8601, UTC: when its guide started, as its results.json says


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Collection:
    """What `ci.collect` kept of one guide's files."""

    directory: str  # absolute path the copies went under
    cap_bytes: int  # at most this much of each file is kept: its end
    files: tuple[CollectedFile, ...]  # in the order the globs were given, each glob's matches sorted
    unmatched: tuple[str, ...]  # globs that matched no file
    files_left_out: int = 0  # matches beyond the file limit: neither copied nor listed
    notes: tuple[str, ...] = ()  # what cut it short: a glob's search stopped at its limit, a stop signal during it


@dataclass(frozen=True)
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
