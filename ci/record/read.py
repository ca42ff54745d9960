"""Reading results.json back: a run record checked for its version, statuses and labels as the harness's own types."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path, PurePath

from ci.base import frozen
from ci.base.text import escape_undecodable
from ci.guide.model import Label
from ci.record.format import JSON, READ_VERSIONS, RECORD_FILE, block_from_json, earlier_from_json, processes_from_json
from ci.record.outcome import BlockResult, EarlierRun

__all__ = ["LastRun", "RecordError", "RecordedGuide", "read_record", "read_run"]


class RecordError(Exception):
    """A recorded run cannot be used: no results.json, unreadable, not a run record, or of another version."""


@frozen
class RecordedGuide:
    """One guide of the recorded run."""

    guide: str  # as the run named it (path or URL)
    started_at: str  # ISO 8601, UTC
    blocks: tuple[BlockResult, ...]  # in run order, as read back (ci.record.format.block_from_json)
    duration_s: float | None = None  # None when the record does not say
    failed: bool | None = None
    interrupted_by: int | None = None  # the signal that stopped the run, if one did
    # the blocks (by name, as the log names them) that started a process still running when the guide ended
    leftovers_started_by: tuple[str, ...] = ()

    def test(self, test_id: str) -> BlockResult | None:
        """The recorded `#test` with this id."""
        return next((b for b in self.blocks if b.step.label is Label.TEST and b.step.id == test_id), None)


@frozen
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


def _load(path: Path) -> JSON:
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
    return data  # each block is checked as it is read


def read_run(directory: str | Path) -> LastRun:
    """Read DIR/results.json; RecordError says what is wrong with it."""
    return read_record(Path(directory) / RECORD_FILE)


def read_record(path: str | Path) -> LastRun:
    """Read a run record (a results.json, whatever its name); paths in it are taken relative to its directory."""
    path = Path(path).absolute()
    data = _load(path)
    try:
        blocks_by_guide: dict[str, list[BlockResult]] = {}
        for raw in data["blocks"]:
            blocks_by_guide.setdefault(str(raw["guide"]), []).append(block_from_json(raw, path.parent))
        guides = {str(g["guide"]): g for g in data.get("guides") or [] if isinstance(g, dict)}
        names = list(dict.fromkeys([*guides, *blocks_by_guide]))
        recorded = tuple(_recorded_guide(name, guides.get(name, {}), blocks_by_guide.get(name, [])) for name in names)
        resumed_from = earlier_from_json(data.get("resumed_from"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"{path} is not a guide-guard run record: {type(exc).__name__} {exc}") from None
    exit_status = data.get("exit_status")
    return LastRun(path.parent, exit_status if isinstance(exit_status, int) else None, recorded, resumed_from)


def _recorded_guide(name: str, raw: JSON, blocks: Sequence[BlockResult]) -> RecordedGuide:
    """The guide's entry of the record's `guides` list ({} when it has none) with its blocks."""
    duration = raw.get("duration_s")
    failed = raw.get("failed")
    signal = raw.get("interrupted_by_signal")
    return RecordedGuide(
        guide=name,
        started_at=str(raw.get("started_at") or ""),
        blocks=tuple(blocks),
        duration_s=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        failed=failed if isinstance(failed, bool) else None,
        interrupted_by=signal if isinstance(signal, int) and not isinstance(signal, bool) else None,
        leftovers_started_by=tuple(
            dict.fromkeys(p.started_by for p in processes_from_json(raw.get("processes_ended") or ()))
        ),
    )
