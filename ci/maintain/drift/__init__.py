"""Doc drift on pull requests: contract, static checks, block diff, last-run re-checks and pins; nothing runs."""

from __future__ import annotations

from ci.maintain.drift.changes import block_changes, changed_results
from ci.maintain.drift.check import check_guide, check_guides
from ci.maintain.drift.findings import BlockChange, Finding, GuideDrift, Severity, contract_findings
from ci.maintain.drift.git import GitError, changed_guides, guides_at_base, old_text, run_git
from ci.maintain.drift.pins import Pin, PyPIVersions, pin_findings, pinned_versions
from ci.maintain.drift.recheck import last_run_findings
from ci.maintain.drift.render import annotation_lines, console_report, step_summary
from ci.maintain.drift.static import python_c_programs, python_heredocs, static_findings

__all__ = [
    "BlockChange",
    "Finding",
    "GitError",
    "GuideDrift",
    "Pin",
    "PyPIVersions",
    "Severity",
    "annotation_lines",
    "block_changes",
    "changed_guides",
    "changed_results",
    "check_guide",
    "check_guides",
    "console_report",
    "contract_findings",
    "guides_at_base",
    "last_run_findings",
    "old_text",
    "pin_findings",
    "pinned_versions",
    "python_c_programs",
    "python_heredocs",
    "run_git",
    "static_findings",
    "step_summary",
]
