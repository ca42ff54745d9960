"""Reading a finished run: its results.json record and the block outputs it points at."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from ci.core.text import MASK

__all__ = ["LastRun", "RecordError", "RecordedBlock", "RecordedGuide", "read_run", "read_stdout", "resolve_loads"]

STDOUT_LIMIT_BYTES = 8 * 1024 * 1024  # a block output larger than this is not read into memory here


class RecordError(Exception):
    """The run directory cannot be used: no results.json, unreadable, or not a run record."""


@dataclass(frozen=True)
class RecordedBlock:
    """One block of the recorded run, as results.json describes it."""

    ordinal: int
    label: str  # "#test" or "#test-setup"
    id: str | None
    store: str | None
    status: str  # passed, failed, mismatch, timed_out, error, skipped, not_run
    line: int  # line of the block's fence when the run took place
    expected: str | None  # `#test`: the expected body after substitution, as the run used it
    code_sha256: str | None  # of the block's body as written when the run took place
    stdout_file: Path | None  # absolute; None when the stream was empty or the block never ran
    captured: Mapping[str, str]  # {store name: value} for a setup that stored

    @property
    def printed(self) -> bool:
        """True when the block ran to its end with exit 0, so its stdout is what it really printed."""
        return self.status in ("passed", "mismatch")


@dataclass(frozen=True)
class RecordedGuide:
    """One guide of the recorded run."""

    guide: str  # as the run named it (path or URL)
    started_at: str  # ISO 8601, UTC
    blocks: tuple[RecordedBlock, ...]  # in run order

    def test(self, test_id: str) -> RecordedBlock | None:
        """The recorded `#test` with this id."""
        return next((b for b in self.blocks if b.label == "#test" and b.id == test_id), None)


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


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _block(raw: Mapping[str, Any], directory: Path) -> RecordedBlock:
    stdout = _text(raw.get("stdout_path"))
    captured = raw.get("captured")
    return RecordedBlock(
        ordinal=int(raw["ordinal"]),
        label=str(raw["label"]),
        id=_text(raw.get("id")),
        store=_text(raw.get("store")),
        status=str(raw["status"]),
        line=int(raw.get("line") or 0),
        expected=_text(raw.get("expected")),
        code_sha256=_text(raw.get("code_sha256")),
        stdout_file=(directory / stdout) if stdout else None,
        captured={str(k): str(v) for k, v in captured.items()} if isinstance(captured, dict) else {},
    )


def read_run(directory: str | Path) -> LastRun:
    """Read DIR/results.json; RecordError says what is wrong with it."""
    base = Path(directory).absolute()
    path = base / "results.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path} does not exist: pass the --output-dir of a finished run") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON (line {exc.lineno}): {exc.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
        raise RecordError(f"{path} is not a guide-guard run record: no 'blocks' list")
    try:
        blocks_by_guide: dict[str, list[RecordedBlock]] = {}
        for raw in data["blocks"]:
            blocks_by_guide.setdefault(str(raw["guide"]), []).append(_block(raw, base))
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


def read_stdout(block: RecordedBlock, limit_bytes: int = STDOUT_LIMIT_BYTES) -> str:
    """The block's stdout as the matcher reads it (UTF-8, invalid bytes replaced); "" when it was empty.

    OSError when the file is missing; ValueError when it is larger than `limit_bytes`.
    """
    if block.stdout_file is None:
        return ""
    size = block.stdout_file.stat().st_size
    if size > limit_bytes:
        raise ValueError(f"{block.stdout_file} holds {size} bytes, more than the {limit_bytes} this reads")
    return block.stdout_file.read_bytes().decode("utf-8", errors="replace")


def resolve_loads(
    guide: RecordedGuide,
    test: RecordedBlock,
    loads: Sequence[tuple[str, str]],
    bodies_as_run: Sequence[str] = (),
) -> tuple[dict[str, str], list[str]]:
    """Values the run substituted into a `#test-result`: {placeholder: value}, and the names not found.

    `loads` are the result's (NAME, PLACEHOLDER) pairs. A value comes from the
    last setup before the test that captured NAME (unless the record masked it
    as a secret); a name given with `--set`
    is captured by no block, so it is read back from the expected body the
    run recorded, by aligning it with a body the run may have used
    (`bodies_as_run`, as written, placeholders in place).
    """
    values: dict[str, str] = {}
    missing: list[str] = []
    for name, placeholder in loads:
        setups = [b for b in guide.blocks if b.ordinal < test.ordinal and name in b.captured]
        # a value the record masked as a secret is no value: never write the mask (or the secret) back
        if setups and MASK not in setups[-1].captured[name]:
            values[placeholder] = setups[-1].captured[name]
    unresolved = [placeholder for _, placeholder in loads if placeholder not in values]
    if unresolved and test.expected is not None:
        for body in bodies_as_run:
            found = _infer_values(body, test.expected, unresolved, values)
            if found is not None:
                values.update(found)
                break
    for name, placeholder in loads:
        if placeholder not in values:
            missing.append(name)
    return values, missing


def _infer_values(
    body: str, expected: str, placeholders: Sequence[str], known: Mapping[str, str]
) -> dict[str, str] | None:
    """Recover placeholder values by aligning a body as written with the body the run substituted.

    Bodies are a few lines long, so a regular expression with back-references
    is fine here (it never sees a block's output).
    """
    wanted = {f"<{p}>": p for p in placeholders}
    known_text = {f"<{p}>": v for p, v in known.items()}
    names = sorted({*wanted, *known_text}, key=len, reverse=True)
    if not names:
        return None
    pattern: list[str] = []
    groups: dict[str, str] = {}
    position = 0
    for found in re.finditer("|".join(re.escape(n) for n in names), body):
        pattern.append(re.escape(body[position : found.start()]))
        text = found.group(0)
        if text in known_text:
            pattern.append(re.escape(known_text[text]))
        elif text in groups:
            pattern.append(f"(?P={groups[text]})")
        else:
            groups[text] = f"g{len(groups)}"
            pattern.append(f"(?P<{groups[text]}>.*?)")
        position = found.end()
    pattern.append(re.escape(body[position:]))
    matched = re.fullmatch("".join(pattern), expected, re.DOTALL)
    if matched is None:
        return None
    return {wanted[text]: matched.group(group) for text, group in groups.items() if text in wanted}
