"""Named records of the guide as planned: labels, blocks, steps and plans (ci.record.outcome holds what became of
them), and the "did you mean" of a document error."""

from __future__ import annotations

import enum
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import TypedDict

from ci.base import frozen
from ci.base.masking import is_secret_name

__all__ = [
    "DEFAULT_WILDCARD",
    "LANGUAGES",
    "SECRET_VALUE_ROUNDS",
    "Block",
    "DocumentError",
    "Expected",
    "GuideSettings",
    "Label",
    "Language",
    "Load",
    "Param",
    "Plan",
    "Problem",
    "Status",
    "Step",
    "StepIdentity",
    "TimeoutRule",
    "body_sha256",
    "closest",
    "naming",
    "naming_words",
    "value_sha256",
]

DEFAULT_WILDCARD = "..."  # the wildcard a guide writes where the output varies, unless it names its own


class Label(str, enum.Enum):
    """The three labels of the contract, spelt as guides write them."""

    TEST = "#test"
    RESULT = "#test-result"
    SETUP = "#test-setup"


class Language(str, enum.Enum):
    """How a runnable block's body is run."""

    SHELL = "shell"
    PYTHON = "python"


LANGUAGES = {  # the language words of a labelled block, and how each is run
    "shell": Language.SHELL,
    "bash": Language.SHELL,
    "sh": Language.SHELL,
    "python": Language.PYTHON,
    "python3": Language.PYTHON,
}


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


@frozen
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


@frozen
class Param:
    """One parameter of a label as written: `key="value"` or a bare flag."""

    key: str
    value: str | None  # None for a flag such as disable_fuzzy
    column: int  # 0-based offset in the info string, for messages
    quoted: bool = True  # False for `key=value` written bare: a document error, but the value is still read


@frozen
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


@frozen
class Load:
    """One `load="NAME>>PH"`: replace `<PH>` by the value stored as NAME."""

    name: str
    placeholder: str


@frozen
class Expected:
    """The `#test-result` paired with a `#test`."""

    body: str  # as written, trailing newlines removed, before substitution
    fuzzy: tuple[str, ...]  # wildcard tokens in effect; () with disable_fuzzy
    loads: tuple[Load, ...]  # substitutions applied to the body before matching
    line: int  # 1-based line of the result's opening fence
    # True: the body is searched for anywhere in the output (the fences dialect's expected text) instead of
    # matched against the whole of it; False for the label contract's #test-result
    search: bool = False
    # the guide line of each line of the body, in order, where they are not the lines below `line` (a console
    # session's outputs sit between its statements); () for a body written whole inside its fence
    guide_lines: tuple[int, ...] = ()

    @property
    def sha256(self) -> str:
        """SHA-256 of what the output is checked against: the body as written, the wildcard tokens, the loads and
        whether the body is searched for; tells whether a recorded run was checked against the text the guide holds now."""
        checked = [self.body, list(self.fuzzy), [[load.name, load.placeholder] for load in self.loads], self.search]
        return body_sha256(json.dumps(checked, ensure_ascii=False))

    def guide_line(self, body_line: int) -> int:
        """Where line BODY_LINE (1-based) of the body as written is in the guide, what reports point at."""
        if self.guide_lines:
            return self.guide_lines[min(max(body_line, 1), len(self.guide_lines)) - 1]
        return self.line + body_line


# PBKDF2's rounds for a value secret by its name (OWASP's figure for PBKDF2-HMAC-SHA256): what a record keeps of
# it must not be a lookup away from a short password
SECRET_VALUE_ROUNDS = 600_000


@functools.lru_cache(maxsize=64)  # a run's blocks load the same few values: each is stretched once
def value_sha256(name: str, value: str) -> str:
    """What a record keeps of a value a block loaded, 64 hex digits: its SHA-256; for a name secret by the
    masking rule (HF_TOKEN), PBKDF2-HMAC-SHA256 of it salted with the name, so that results.json, which may be
    published as an artifact, never gives a short secret away to a dictionary."""
    if not is_secret_name(name):
        return body_sha256(value)
    salt = f"guide-guard loaded value {name}".encode()
    return hashlib.pbkdf2_hmac("sha256", value.encode("utf-8", "surrogateescape"), salt, SECRET_VALUE_ROUNDS).hex()


def body_sha256(body: str) -> str:
    """SHA-256 (hex) of a text, such as a block's body: tells whether a recorded run ran the command the guide holds
    now, or loaded the value it loads now, without recording the value."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


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


@frozen
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
    # True: the block's stderr goes to its stdout file, interleaved as written (the fences dialect checks both
    # streams merged); False for the label contract, which keeps the two apart
    merge_streams: bool = False
    # a step read back from results.json (ci.record.format), which holds no body: its body's SHA-256 as recorded
    recorded_sha256: str | None = None
    # a #test read back from results.json, which holds no #test-result as written: its Expected.sha256 as recorded;
    # None in a record older than version 6
    recorded_result_sha256: str | None = None

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
        """SHA-256 of the body as written (as recorded, for a step read back): `body_sha256`."""
        return self.recorded_sha256 or body_sha256(self.body)

    @property
    def result_sha256(self) -> str | None:
        """For a `#test`: `Expected.sha256` of its `#test-result` (as recorded, for a step read back); None for a
        setup, and for a `#test` read back from a record older than version 6."""
        if self.expected is not None:
            return self.expected.sha256
        return self.recorded_result_sha256

    @property
    def loaded_names(self) -> tuple[str, ...]:
        """The names of the values the step loads, into its command or its `#test-result`, each once, in order."""
        loads = (*self.loads, *(self.expected.loads if self.expected else ()))
        return tuple(dict.fromkeys(load.name for load in loads))

    def loaded_sha256(self, values: Mapping[str, str]) -> dict[str, str]:
        """{name: SHA-256 of its value in VALUES} for each value the step loads: what a run records of the values a
        block ran with (never the values, which may be secrets). A name VALUES does not hold is left out."""
        return {name: value_sha256(name, values[name]) for name in self.loaded_names if name in values}

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


@frozen
class TimeoutRule:
    """One time-limit rule by command kind: a block whose command holds `contains` gets `timeout_s`."""

    contains: str  # a piece of the command as written (`cmake --build`)
    timeout_s: float  # the block's limit when this is the first rule its command matches


@frozen
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
    dialect: str | None = None  # ci.dialect: how the guide is read (labels, fences, pycon, auto); None: not said
    timeout_rules: tuple[TimeoutRule, ...] = ()  # ci.timeout_rules: a block's limit by what its command holds


@frozen
class Plan:
    """A validated guide: what will run, in order. Built only when there is no document error."""

    guide: str  # the guide as the user named it (path or URL)
    source_path: str | None  # local path for annotations; None for URLs
    steps: tuple[Step, ...]
    settings: GuideSettings
    warnings: tuple[Problem, ...] = ()  # suspicious but legal text (a `#tset` typo)


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word most like WORD (case aside), None when none is close enough to be the one meant."""
    by_lower: dict[str, str] = {}
    for name in sorted(known):
        by_lower.setdefault(name.lower(), name)
    import difflib  # a misspelt word only

    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1)
    return by_lower[found[0]] if found else None
