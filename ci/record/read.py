"""Reading results.json back: a run record checked for its version, statuses and labels as the harness's own types."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import cast

from ci.base.text import escape_undecodable
from ci.guide.model import Label, Status, naming
from ci.record.format import READ_VERSIONS, RECORD_FILE, BlockRecord, RunRecord
from ci.record.outcome import EarlierRun

__all__ = ["LastRun", "RecordError", "RecordedBlock", "RecordedGuide", "read_record", "read_run"]


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
    expected: str | None  # `#test`: the expected body after substitution, as the run used it; None when recorded cut
    code_sha256: str | None  # of the block's body as written when the run took place
    stdout_file: Path | None  # absolute; None when the stream was empty or the block never ran
    captured: Mapping[str, str]  # {store name: value} for a setup that stored; {} when the value was recorded cut
    duration_s: float = 0.0
    start_s: float | None = None  # seconds from the guide's start; None when never started or not recorded (< 3)
    peak_rss_bytes: int | None = None
    cpu_s: float | None = None
    stdout_bytes: int | None = None  # what the block wrote; a file kept smaller was masked since (--mask-files)
    captured_file: Path | None = None  # absolute: the file holding a stored value `captured` leaves out as cut
    kept_from: EarlierRun | None = None  # skipped in a resumed run: the run it passed in (since version 4)

    @property
    def name(self) -> str:
        """The id, else the store, else the ordinal: as the log named the block."""
        return next((value for _, value in naming(self.id, self.store)), f"#{self.ordinal}")

    @property
    def passed(self) -> bool:
        """True when the block passed in this run, or in the earlier run this one resumed and kept it from."""
        return self.status is Status.PASSED or (self.status is Status.SKIPPED and self.kept_from is not None)

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
    duration_s: float | None = None  # None when the record does not say
    failed: bool | None = None
    interrupted_by: int | None = None  # the signal that stopped the run, if one did
    # the blocks (by name, as the log names them) that started a process still running when the guide ended
    leftovers_started_by: tuple[str, ...] = ()

    def test(self, test_id: str) -> RecordedBlock | None:
        """The recorded `#test` with this id."""
        return next((b for b in self.blocks if b.label is Label.TEST and b.id == test_id), None)


@dataclass(frozen=True)
class LastRun:
    """A run's output directory: where it is and what it recorded."""

    directory: Path
    exit_status: int | None
    guides: tuple[RecordedGuide, ...]
    resumed_from: EarlierRun | None = None  # the run this one continued (--resume), when it did

    def guide_for(self, name: str) -> RecordedGuide | None:
        """The recorded guide that `name` refers to.

        The run may have named the guide differently (an absolute path on the
        runner, a path relative to another directory), so after an exact match
        this compares resolved paths, then the longest common trailing path
        (`docs/specforge.md` finds `/home/runner/work/x/x/docs/specforge.md`);
        a tie is no match.
        """
        shown = escape_undecodable(name)  # as the run recorded a name that is not UTF-8
        for recorded in self.guides:
            if recorded.guide in (name, shown):
                return recorded
        wanted = _resolved(name)
        for recorded in self.guides:
            if wanted is not None and _resolved(recorded.guide) == wanted:
                return recorded
        scored = [(_common_tail(PurePath(shown).parts, PurePath(g.guide).parts), g) for g in self.guides]
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


def _number(value: object) -> float | None:
    """A number of the record, or None for null (or what is no number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _inside(directory: Path, relative: str, key: str) -> Path:
    """RELATIVE (the record's KEY) taken in DIRECTORY; ValueError when it leads out of it (an absolute path,
    `..`, a symbolic link): a record from elsewhere (a CI artifact) names no other file of this machine."""
    path = directory / relative
    if not path.resolve().is_relative_to(directory.resolve()):
        raise ValueError(f"its {key} {relative!r} leads out of {directory}, where the writer keeps every file")
    return path


def _earlier_run(raw: object) -> EarlierRun | None:
    """A `resumed_from` or `kept_from` object as read back; None for null (and in records older than version 4)."""
    if not isinstance(raw, dict):
        return None
    return EarlierRun(directory=str(raw["directory"]), started_at=str(raw["started_at"]))


def _recorded_block(raw: BlockRecord, directory: Path) -> RecordedBlock:
    """The block as read back; KeyError, TypeError or ValueError when `raw` is not what the writer writes."""
    stdout = _text(raw.get("stdout_path"))
    whole = raw.get("captured_whole")
    whole_path = _text(whole.get("path")) if isinstance(whole, dict) else None
    # a text recorded cut (its head) is no value to re-check with: the whole one may hold a secret the record masked
    captured = raw.get("captured") if raw.get("captured_whole") is None else {}
    expected = _text(raw.get("expected")) if raw.get("expected_whole") is None else None
    return RecordedBlock(
        ordinal=int(raw["ordinal"]),
        label=Label(raw["label"]),
        id=_text(raw.get("id")),
        store=_text(raw.get("store")),
        status=Status(raw["status"]),
        line=int(raw.get("line") or 0),
        expected=expected,
        code_sha256=_text(raw.get("code_sha256")),
        stdout_file=_inside(directory, stdout, "stdout_path") if stdout else None,
        captured={str(k): str(v) for k, v in captured.items()} if isinstance(captured, dict) else {},
        duration_s=_number(raw.get("duration_s")) or 0.0,
        start_s=_number(raw.get("start_s")),
        peak_rss_bytes=int(rss) if (rss := _number(raw.get("peak_rss_bytes"))) is not None else None,
        cpu_s=_number(raw.get("cpu_s")),
        stdout_bytes=int(size) if (size := _number(raw.get("stdout_bytes"))) is not None else None,
        captured_file=_inside(directory, whole_path, "captured_whole") if whole_path else None,
        kept_from=_earlier_run(raw.get("kept_from")),
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
    if version not in READ_VERSIONS:
        versions = " and ".join(", ".join(map(str, READ_VERSIONS)).rsplit(", ", 1))
        raise RecordError(
            f"{path} is a run record of version {version}, and this guide-guard reads versions {versions}"
            f" only: read it with a guide-guard that writes version {version}"
        )
    if not isinstance(data.get("blocks"), list):
        raise RecordError(f"{path} is not a guide-guard run record: no 'blocks' list")
    return cast(RunRecord, data)  # each block is checked as it is read


def read_run(directory: str | Path) -> LastRun:
    """Read DIR/results.json; RecordError says what is wrong with it."""
    return read_record(Path(directory) / RECORD_FILE)


def read_record(path: str | Path) -> LastRun:
    """Read a run record (a results.json, whatever its name); paths in it are taken relative to its directory."""
    path = Path(path).absolute()
    base = path.parent
    data = _load(path)
    try:
        blocks_by_guide: dict[str, list[RecordedBlock]] = {}
        for raw in data["blocks"]:
            blocks_by_guide.setdefault(str(raw["guide"]), []).append(_recorded_block(raw, base))
        guides = {str(g["guide"]): g for g in data.get("guides") or [] if isinstance(g, dict)}
        _earlier_run(data.get("resumed_from"))  # checked here, where a bad one is said
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"{path} is not a guide-guard run record: {type(exc).__name__} {exc}") from None
    names = list(dict.fromkeys([*guides, *blocks_by_guide]))
    exit_status = data.get("exit_status")
    return LastRun(
        directory=base,
        exit_status=exit_status if isinstance(exit_status, int) else None,
        guides=tuple(_recorded_guide(name, guides.get(name, {}), blocks_by_guide.get(name, [])) for name in names),
        resumed_from=_earlier_run(data.get("resumed_from")),
    )


def _recorded_guide(name: str, raw: Mapping[str, object], blocks: Sequence[RecordedBlock]) -> RecordedGuide:
    """The guide's entry of the record's `guides` list ({} when it has none) with its blocks."""
    duration = raw.get("duration_s")
    failed = raw.get("failed")
    signal = raw.get("interrupted_by_signal")
    ended = raw.get("processes_ended")
    started_by = [p.get("started_by") for p in ended if isinstance(p, dict)] if isinstance(ended, list) else []
    return RecordedGuide(
        guide=name,
        started_at=str(raw.get("started_at") or ""),
        blocks=tuple(blocks),
        duration_s=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        failed=failed if isinstance(failed, bool) else None,
        interrupted_by=signal if isinstance(signal, int) and not isinstance(signal, bool) else None,
        leftovers_started_by=tuple(dict.fromkeys(name for name in started_by if isinstance(name, str))),
    )
