"""What every drift check returns: findings on a guide's lines, changed blocks, and the tally per guide."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ci.core.model import Block, naming_words

__all__ = [
    "CHECKS",
    "CONTRACT",
    "LAST_RUN",
    "PINS",
    "STATIC",
    "BlockChange",
    "Finding",
    "GuideDrift",
    "Severity",
    "block_name",
    "first_param",
]

# check names, in the order reports list them
CONTRACT, STATIC, LAST_RUN, PINS = "contract", "static", "last run", "pins"
CHECKS = (CONTRACT, STATIC, LAST_RUN, PINS)


class Severity(str, enum.Enum):
    """How much a finding matters: errors fail the check, the others only annotate."""

    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


@dataclass(frozen=True)
class Finding:
    """One thing to tell about a guide, located on its line."""

    check: str  # CONTRACT, STATIC, LAST_RUN or PINS
    severity: Severity
    file: str  # the guide as named
    line: int  # 1-based; 0 for the whole file
    message: str


@dataclass(frozen=True)
class BlockChange:
    """A runnable block added, removed or changed against the base revision."""

    file: str
    block: str  # how the block is named: "#test id=check-py", "#test-setup store=model_path"
    line: int  # in the new guide; in the base revision's for a removed block
    change: str  # "added", "removed" or "changed"
    what: tuple[str, ...] = ()  # for "changed": command, expected output, parameters, language, hidden


@dataclass
class GuideDrift:
    """Everything the drift check found in one guide."""

    file: str
    findings: list[Finding] = field(default_factory=list)
    changes: list[BlockChange] = field(default_factory=list)
    rechecked: int = 0  # #test-result bodies re-checked against the last run

    @property
    def failed(self) -> bool:
        """True when a finding is an error: the drift check fails."""
        return any(finding.severity is Severity.ERROR for finding in self.findings)


def first_param(block: Block, key: str) -> str | None:
    """The value of the block's first `key="..."`; None when it has none."""
    return next((p.value for p in block.params if p.key == key and p.value is not None), None)


def block_name(block: Block) -> str:
    """How findings name a block: `#test id=X`, `#test-setup store=Y`, else by its line."""
    words = naming_words(first_param(block, "id"), first_param(block, "store"))
    return f"{block.label.value} {words[0]}" if words else f"{block.label.value} at line {block.line}"
