"""A guide's status for the board: its verdict, the upstream ref, when it ran and last passed, how long it took.

One JSON file per guide (NAME.json), written by guide-run.yml's status job from the run job's outputs, or
read from a run's results.json; and a Shields endpoint badge beside it (NAME.badge.json), which holds
Shields' keys only, since Shields refuses a document with any other key.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path, PurePath
from typing import Any

from ci.base import frozen
from ci.github.registry.model import ENTRY_NAME
from ci.record import RECORD_FILE, LastRun, RecordError, read_run

__all__ = [
    "BADGE_SUFFIX",
    "VERDICTS",
    "BoardInputError",
    "GuideStatus",
    "badge",
    "read_statuses",
    "statuses_of_run",
]

# What a guide's last run came to: the harness's verdicts, a run job that ended without one (cancelled,
# or it failed before the harness), and a night the monitor found no reason to run it.
VERDICTS = ("passed", "failed", "interrupted", "no_verdict", "not_run")
BADGE_SUFFIX = ".badge.json"
_COLORS = {
    "passed": "brightgreen",
    "failed": "red",
    "interrupted": "orange",
    "no_verdict": "red",
    "not_run": "lightgrey",
}
_FILE_NAME = re.compile(r"[^A-Za-z0-9-]+")


class BoardInputError(Exception):
    """A path given to the board holds neither a run's results.json nor status files; the message says which."""


@frozen
class GuideStatus:
    """One guide's row of the board."""

    name: str
    guide: str
    verdict: str  # one of VERDICTS
    ref: str | None = None  # the upstream ref the run gave the blocks (UPSTREAM_REF)
    date: str | None = None  # ISO 8601, UTC: when the run started (or was recorded)
    duration_s: float | None = None
    last_passed: str | None = None  # the date of the newest run that passed
    run_url: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)  # block status -> number of blocks

    @property
    def text(self) -> str:
        """The verdict as the board and the badge write it."""
        return self.verdict.replace("_", " ")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "guide": self.guide,
            "verdict": self.verdict,
            "ref": self.ref,
            "date": self.date,
            "duration_s": self.duration_s,
            "last_passed": self.last_passed,
            "run_url": self.run_url,
            "counts": dict(self.counts),
        }


def badge(status: GuideStatus) -> dict[str, Any]:
    """The status in Shields' endpoint format (https://shields.io/badges/endpoint-badge)."""
    return {"schemaVersion": 1, "label": status.name, "message": status.text, "color": _COLORS[status.verdict]}


def _optional_text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _from_json(data: object, source: Path) -> GuideStatus:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        raise BoardInputError(
            f"{source} is not a guide status: no 'name' (a status file holds name, guide, verdict, ...)"
        )
    if not ENTRY_NAME.match(data["name"]):
        # the board writes NAME.json and NAME.badge.json: a name such as ../../x would write outside --output
        raise BoardInputError(
            f"{source}: name {data['name']!r} must be letters, digits and dashes (at most 80), as a registry entry's"
        )
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        raise BoardInputError(f"{source}: verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    duration = data.get("duration_s")
    counts = data.get("counts")
    return GuideStatus(
        name=data["name"],
        guide=str(data.get("guide") or ""),
        verdict=verdict,
        ref=_optional_text(data, "ref"),
        date=_optional_text(data, "date"),
        duration_s=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        last_passed=_optional_text(data, "last_passed"),
        run_url=_optional_text(data, "run_url"),
        counts={str(k): v for k, v in counts.items() if isinstance(v, int)} if isinstance(counts, dict) else {},
    )


def _read_status_file(path: Path) -> GuideStatus:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BoardInputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except json.JSONDecodeError as exc:
        raise BoardInputError(f"{path} is not valid JSON (line {exc.lineno}): {exc.msg}") from None
    return _from_json(data, path)


def _name_for(guide: str, names: Mapping[str, str], run: LastRun) -> str:
    """The registry's name of the recorded guide, else one made from its file name."""
    for registered_guide, name in names.items():
        found = run.guide_for(registered_guide)
        if found is not None and found.guide == guide:
            return name
    return _FILE_NAME.sub("-", PurePath(guide).stem).strip("-") or "guide"


def statuses_of_run(directory: Path, names: Mapping[str, str]) -> list[GuideStatus]:
    """The status of each guide a run's output directory recorded; NAMES maps registered guides to entry names."""
    try:
        run = read_run(directory)
    except RecordError as exc:
        raise BoardInputError(str(exc)) from None
    found = []
    for recorded in run.guides:
        if recorded.interrupted_by is not None:
            verdict = "interrupted"
        elif recorded.failed is None:
            verdict = "passed" if run.exit_status == 0 else "failed"
        else:
            verdict = "failed" if recorded.failed else "passed"
        status = GuideStatus(
            name=_name_for(recorded.guide, names, run),
            guide=recorded.guide,
            verdict=verdict,
            date=recorded.started_at or None,
            duration_s=recorded.duration_s,
            counts=dict(Counter(block.status.value for block in recorded.blocks)),
        )
        found.append(replace(status, last_passed=status.date) if verdict == "passed" else status)
    return found


def read_statuses(paths: Sequence[Path], names: Mapping[str, str]) -> list[GuideStatus]:
    """The statuses in PATHS: a run's output directory (results.json, also under outputs/), a status file, or a
    directory of status files (NAME.json; the badges beside them are skipped)."""
    found: list[GuideStatus] = []
    for path in paths:
        run_dir = next((d for d in (path, path / "outputs") if (d / RECORD_FILE).is_file()), None)
        if run_dir is not None:
            found.extend(statuses_of_run(run_dir, names))
        elif path.is_file():
            found.append(_read_status_file(path))
        elif path.is_dir():
            files = sorted(p for p in path.glob("*.json") if not p.name.endswith(BADGE_SUFFIX))
            found.extend(_read_status_file(file) for file in files)
        else:
            raise BoardInputError(f"{path} does not exist: give a run's --output-dir, or a directory of status files")
    return found
