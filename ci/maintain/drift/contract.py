"""Check 1, the contract: every document error and warning of a guide, as the runner would report them."""

from __future__ import annotations

from ci.core.model import DocumentError, Plan, Problem
from ci.core.parse import ParsedGuide
from ci.core.plan import build_plan
from ci.maintain.drift.findings import CONTRACT, Finding, Severity

__all__ = ["contract_findings", "document_error_findings", "warning_findings"]


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
