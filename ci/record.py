"""results.json: the machine-readable record of a run, its format, its writer and its reader."""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TypedDict, cast, overload

from ci.core.model import (
    BlockResult,
    Collection,
    DiagnosticResult,
    GuideOutcome,
    Label,
    Status,
    StepIdentity,
    TrackedProcess,
)
from ci.core.text import clean_text

__all__ = [
    "RECORD_FILE",
    "RECORD_VERSION",
    "BlockRecord",
    "CollectedFileRecord",
    "CollectionRecord",
    "DiagnosticRecord",
    "GuideRecord",
    "LastRun",
    "ProcessRecord",
    "RecordError",
    "RecordedBlock",
    "RecordedGuide",
    "RunRecord",
    "read_run",
    "run_record",
    "write_record",
]

# The format's version, written into every record and checked on reading. Raise it with any change to
# the keys or their meaning, together with docs/results.schema.json (whose objects admit no other keys).
RECORD_VERSION = 1
RECORD_FILE = "results.json"  # in the run's output directory

# ---- the format: one TypedDict per object of the file, so that writer and reader share the key names


class ProcessRecord(TypedDict):
    """A process the harness ended."""

    pid: int
    command: str
    started_by: str  # the block whose process tree it came from
    ended_by: str  # "SIGTERM" or "SIGKILL"


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


class CollectedFileRecord(TypedDict):
    """One file matched by a `ci.collect` glob."""

    pattern: str
    source: str
    copied_to: str | None  # relative to the output directory
    size_bytes: int
    copied_bytes: int
    truncated: bool
    note: str


class CollectionRecord(TypedDict):
    """The guide's `ci.collect` files, copied when it ended."""

    directory: str
    cap_bytes: int
    files: list[CollectedFileRecord]
    unmatched: list[str]
    files_left_out: int


class GuideRecord(TypedDict):
    """One guide of the run."""

    guide: str
    started_at: str  # ISO 8601, UTC
    duration_s: float
    failed: bool
    interrupted_by_signal: int | None
    processes_ended: list[ProcessRecord]  # at teardown
    collected: CollectionRecord | None


class BlockRecord(StepIdentity):
    """One runnable block of the run; its identity keys come from `Step.identity`."""

    guide: str
    heading: str | None
    status: str  # a Status's value
    message: str
    exit_code: int | None
    duration_s: float
    captured: dict[str, str]  # {store name: value} for a setup that stored
    code_sha256: str  # Step.code_sha256
    expected: str | None
    first_unmatched_line: int | None
    stdout_path: str | None  # relative to the output directory; None for a stream that stayed empty
    stderr_path: str | None
    stdout_bytes: int
    stderr_bytes: int
    error_marker: str | None
    stack_dumps: list[str]
    stack_dump_notes: list[str]
    processes_ended: list[ProcessRecord]
    peak_rss_bytes: int | None
    cpu_s: float | None
    diagnostics: list[DiagnosticRecord]


class RunRecord(TypedDict):
    """The whole file."""

    version: int  # RECORD_VERSION
    exit_status: int
    harness_peak_rss_bytes: int
    guides: list[GuideRecord]
    blocks: list[BlockRecord]  # every guide's, in run order


# ---- writing


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


def _block(result: BlockResult, guide: str, base: Path) -> BlockRecord:
    step = result.step
    return {
        "guide": guide,
        **step.identity(),
        "heading": clean_text(step.heading) if step.heading else None,
        "status": result.status.value,
        "message": clean_text(result.message),
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 3),
        "captured": {result.stored[0]: clean_text(result.stored[1])} if result.stored else {},
        "code_sha256": step.code_sha256,
        "expected": clean_text(result.expected) if result.expected is not None else None,
        "first_unmatched_line": result.match.first_unmatched_line if result.match else None,
        "stdout_path": _relative(result.stdout_path, base),
        "stderr_path": _relative(result.stderr_path, base),
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "error_marker": result.marker_found,
        "stack_dumps": [_relative(p, base) for p in result.dumps],
        "stack_dump_notes": [clean_text(n) for n in result.dump_notes],
        "processes_ended": _processes(result.ended),
        "peak_rss_bytes": result.peak_rss_bytes,
        "cpu_s": round(result.cpu_s, 3) if result.cpu_s is not None else None,
        "diagnostics": [_diagnostic(d, base) for d in result.diagnostics],
    }


def _diagnostic(diagnostic: DiagnosticResult, base: Path) -> DiagnosticRecord:
    return {
        "command": clean_text(diagnostic.command),
        "output_path": _relative(diagnostic.output_path, base),
        "output_bytes": diagnostic.output_bytes,
        "output_capped": diagnostic.output_capped,
        "exit_code": diagnostic.exit_code,
        "timed_out": diagnostic.timed_out,
        "duration_s": round(diagnostic.duration_s, 3),
        "message": clean_text(diagnostic.message),
    }


def _collection(collection: Collection | None, base: Path) -> CollectionRecord | None:
    if collection is None:
        return None
    return {
        "directory": _relative(collection.directory, base),
        "cap_bytes": collection.cap_bytes,
        "files": [
            {
                "pattern": f.pattern,
                "source": f.source,
                "copied_to": _relative(f.copied_to, base),
                "size_bytes": f.size_bytes,
                "copied_bytes": f.copied_bytes,
                "truncated": f.truncated,
                "note": clean_text(f.note),
            }
            for f in collection.files
        ],
        "unmatched": list(collection.unmatched),
        "files_left_out": collection.files_left_out,
    }


def _processes(processes: Sequence[TrackedProcess]) -> list[ProcessRecord]:
    return [
        {"pid": p.pid, "command": clean_text(p.command), "started_by": p.started_by, "ended_by": p.ended_by}
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


def run_record(outcomes: Sequence[GuideOutcome], exit_status: int, base: Path) -> RunRecord:
    """The run record: every block of every guide, plus per-guide verdicts and leftovers."""
    return {
        "version": RECORD_VERSION,
        "exit_status": exit_status,
        "harness_peak_rss_bytes": _own_peak_rss_bytes(),
        "guides": [
            {
                "guide": o.plan.guide,
                "started_at": o.started_at,
                "duration_s": round(o.duration_s, 3),
                "failed": o.failed,
                "interrupted_by_signal": o.interrupted_by,
                "processes_ended": _processes(o.leftovers),
                "collected": _collection(o.collection, base),
            }
            for o in outcomes
        ],
        "blocks": [_block(r, o.plan.guide, base) for o in outcomes for r in o.results],
    }


def write_record(path: Path, outcomes: Sequence[GuideOutcome], exit_status: int) -> None:
    """Write the run record to `path`; paths in it are relative to `path`'s directory."""
    record = run_record(outcomes, exit_status, path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One line per block: readable, and json's fast C encoder works only without indent.
    head = json.dumps({key: value for key, value in record.items() if key != "blocks"}, indent=2, ensure_ascii=False)
    blocks = record["blocks"]
    lines = ",\n".join("    " + json.dumps(block, ensure_ascii=False) for block in blocks)
    text = head[:-2] + (',\n  "blocks": [\n' + lines + "\n  ]\n}\n" if blocks else ',\n  "blocks": []\n}\n')
    path.write_text(text, encoding="utf-8")


# ---- reading


class RecordError(Exception):
    """A recorded run cannot be used: no results.json, unreadable, not a run record, or of another version."""


@dataclass(frozen=True)
class RecordedBlock:
    """One block of the recorded run, as results.json describes it."""

    ordinal: int
    label: Label  # TEST or SETUP
    id: str | None
    store: str | None
    status: Status
    line: int  # line of the block's fence when the run took place
    expected: str | None  # `#test`: the expected body after substitution, as the run used it
    code_sha256: str | None  # of the block's body as written when the run took place
    stdout_file: Path | None  # absolute; None when the stream was empty or the block never ran
    captured: Mapping[str, str]  # {store name: value} for a setup that stored

    @property
    def printed(self) -> bool:
        """True when the block ran to its end with exit 0, so its stdout is what it really printed."""
        return self.status in (Status.PASSED, Status.MISMATCH)


@dataclass(frozen=True)
class RecordedGuide:
    """One guide of the recorded run."""

    guide: str  # as the run named it (path or URL)
    started_at: str  # ISO 8601, UTC
    blocks: tuple[RecordedBlock, ...]  # in run order

    def test(self, test_id: str) -> RecordedBlock | None:
        """The recorded `#test` with this id."""
        return next((b for b in self.blocks if b.label is Label.TEST and b.id == test_id), None)


@dataclass(frozen=True)
class LastRun:
    """A run's output directory: where it is and what it recorded."""

    directory: Path
    exit_status: int | None
    guides: tuple[RecordedGuide, ...]

    def guide_for(self, name: str) -> RecordedGuide | None:
        """The recorded guide that `name` refers to.

        The run may have named the guide differently (an absolute path on the
        runner, a path relative to another directory), so after an exact match
        this compares resolved paths, then the longest common trailing path
        (`docs/specforge.md` finds `/home/runner/work/x/x/docs/specforge.md`);
        a tie is no match.
        """
        for recorded in self.guides:
            if recorded.guide == name:
                return recorded
        wanted = _resolved(name)
        for recorded in self.guides:
            if wanted is not None and _resolved(recorded.guide) == wanted:
                return recorded
        scored = [(_common_tail(PurePath(name).parts, PurePath(g.guide).parts), g) for g in self.guides]
        best = max((score for score, _ in scored), default=0)
        found = [g for score, g in scored if score == best]
        return found[0] if best > 0 and len(found) == 1 else None


def _resolved(name: str) -> Path | None:
    if "://" in name:
        return None
    try:
        return Path(name).resolve()
    except OSError:
        return None


def _common_tail(left: Sequence[str], right: Sequence[str]) -> int:
    count = 0
    while count < min(len(left), len(right)) and left[-1 - count] == right[-1 - count]:
        count += 1
    return count


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _recorded_block(raw: BlockRecord, directory: Path) -> RecordedBlock:
    """The block as read back; KeyError, TypeError or ValueError when `raw` is not what the writer writes."""
    stdout = _text(raw.get("stdout_path"))
    captured = raw.get("captured")
    return RecordedBlock(
        ordinal=int(raw["ordinal"]),
        label=Label(raw["label"]),
        id=_text(raw.get("id")),
        store=_text(raw.get("store")),
        status=Status(raw["status"]),
        line=int(raw.get("line") or 0),
        expected=_text(raw.get("expected")),
        code_sha256=_text(raw.get("code_sha256")),
        stdout_file=(directory / stdout) if stdout else None,
        captured={str(k): str(v) for k, v in captured.items()} if isinstance(captured, dict) else {},
    )


def _load(path: Path) -> RunRecord:
    """The record in `path`, checked as far as the version and the list of blocks."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path} does not exist: pass the --output-dir of a finished run") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON (line {exc.lineno}): {exc.msg}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path} is not a guide-guard run record: no 'blocks' list")
    # The version comes first: a newer format may have moved everything else.
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordError(f"{path} is not a guide-guard run record: no 'version' number")
    if version != RECORD_VERSION:
        raise RecordError(
            f"{path} is a run record of version {version}, and this guide-guard reads version {RECORD_VERSION}"
            f" only: read it with a guide-guard that writes version {version}"
        )
    if not isinstance(data.get("blocks"), list):
        raise RecordError(f"{path} is not a guide-guard run record: no 'blocks' list")
    return cast(RunRecord, data)  # each block is checked as it is read


def read_run(directory: str | Path) -> LastRun:
    """Read DIR/results.json; RecordError says what is wrong with it."""
    base = Path(directory).absolute()
    path = base / RECORD_FILE
    data = _load(path)
    try:
        blocks_by_guide: dict[str, list[RecordedBlock]] = {}
        for raw in data["blocks"]:
            blocks_by_guide.setdefault(str(raw["guide"]), []).append(_recorded_block(raw, base))
        started = {
            str(g["guide"]): str(g.get("started_at") or "") for g in data.get("guides") or [] if isinstance(g, dict)
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"{path} is not a guide-guard run record: {type(exc).__name__} {exc}") from None
    names = list(dict.fromkeys([*started, *blocks_by_guide]))
    exit_status = data.get("exit_status")
    return LastRun(
        directory=base,
        exit_status=exit_status if isinstance(exit_status, int) else None,
        guides=tuple(
            RecordedGuide(guide=name, started_at=started.get(name, ""), blocks=tuple(blocks_by_guide.get(name, [])))
            for name in names
        ),
    )
