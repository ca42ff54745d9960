"""What every drift check returns (findings on a guide's lines, changed blocks, the tally per guide), and check 1,
the contract: every document error and warning of a guide, as the runner would report them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ci.base import frozen
from ci.guide.model import Block, DocumentError, Plan, Problem, naming_words
from ci.guide.parse import ParsedGuide
from ci.guide.plan import build_plan

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
    "contract_findings",
    "document_error_findings",
    "first_param",
    "warning_findings",
]

# check names, in the order reports list them
CONTRACT, STATIC, LAST_RUN, PINS = "contract", "static", "last run", "pins"
CHECKS = (CONTRACT, STATIC, LAST_RUN, PINS)


class Severity(str, enum.Enum):
    """How much a finding matters: errors fail the check, the others only annotate."""

    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


@frozen
class Finding:
    """One thing to tell about a guide, located on its line."""

    check: str  # CONTRACT, STATIC, LAST_RUN or PINS
    severity: Severity
    file: str  # the guide as named
    line: int  # 1-based; 0 for the whole file
    message: str


@frozen
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


def contract_findings(parsed: ParsedGuide) -> tuple[Plan | None, list[Finding]]:
    """Every document error (and warning) of the guide, as the runner would report them."""
    try:
        plan = build_plan(parsed, source_path=parsed.file)
    except DocumentError as error:
        return None, document_error_findings(parsed.file, error) + warning_findings(parsed.file, error.warnings)
    return plan, warning_findings(parsed.file, plan.warnings)


def document_error_findings(file: str, error: DocumentError) -> list[Finding]:
    """The problems of a document error (the guide cannot be read, or does not plan) as errors."""
    return [Finding(CONTRACT, Severity.ERROR, file, p.line, p.message) for p in error.problems]


def warning_findings(file: str, warnings: tuple[Problem, ...]) -> list[Finding]:
    """The warnings of a guide's planning as warnings."""
    return [Finding(CONTRACT, Severity.WARNING, file, w.line, w.message) for w in warnings]
