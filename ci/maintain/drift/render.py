"""The drift check's reports: the console report, the step summary and the annotations."""

from __future__ import annotations

from collections.abc import Sequence

from ci.base.text import plural
from ci.maintain.drift.findings import CHECKS, Finding, GuideDrift, Severity
from ci.report.github import MAX_ANNOTATIONS, annotation
from ci.report.summary import fit_summary, table_cell

__all__ = ["annotation_lines", "console_report", "step_summary"]


def _rank(finding: Finding) -> tuple[int, int, str, int]:
    severities = [Severity.ERROR, Severity.WARNING, Severity.NOTICE]
    return severities.index(finding.severity), CHECKS.index(finding.check), finding.file, finding.line


def _location(file: str, line: int) -> str:
    return f"{file}:{line}" if line else file


def console_report(drifts: Sequence[GuideDrift]) -> str:
    """The plain report for a terminal or a job log."""
    out = []
    for drift in drifts:
        out.append(f"=== {drift.file}")
        for finding in sorted(drift.findings, key=_rank):
            out.append(
                f"{finding.severity.value}: {_location(finding.file, finding.line)}: [{finding.check}] {finding.message}"
            )
        if drift.changes:
            out.append(f"{_to_reverify(len(drift.changes))}:")
            for change in drift.changes:
                what = f" ({', '.join(change.what)})" if change.what else ""
                where = f"line {change.line}" + (" at the base revision" if change.change == "removed" else "")
                out.append(f"  {change.change:<8} {change.block}, {where}{what}")
        if drift.rechecked:
            out.append(f"re-checked {plural(drift.rechecked, 'changed #test-result')} against the last run")
    out.append(_tally(drifts))
    return "\n".join(out) + "\n"


def _tally(drifts: Sequence[GuideDrift]) -> str:
    counts = {severity: 0 for severity in Severity}
    for drift in drifts:
        for finding in drift.findings:
            counts[finding.severity] += 1
    changes = sum(len(d.changes) for d in drifts)
    parts = [plural(n, s.value) for s, n in counts.items()]
    guides = plural(len(drifts), "guide")
    return f"drift: {guides}: {', '.join(parts)}; {_to_reverify(changes)}"


def _to_reverify(count: int) -> str:
    """`1 block needs re-verification on hardware`, `2 blocks need ...`."""
    return f"{plural(count, 'block')} {'needs' if count == 1 else 'need'} re-verification on hardware"


def _cell(text: str) -> str:
    return table_cell(text)[:500]


def step_summary(drifts: Sequence[GuideDrift]) -> str:
    """The Markdown step summary: findings and the blocks to re-verify, per guide."""
    errors = sum(1 for d in drifts for f in d.findings if f.severity is Severity.ERROR)
    parts = [f"## {'❌' if errors else '✅'} Guide drift\n", _tally(drifts) + "\n"]
    for drift in drifts:
        parts.append(f"### {_cell(drift.file)}\n")
        if drift.findings:
            parts.append("| level | check | line | message |")
            parts.append("|---|---|---|---|")
            for finding in sorted(drift.findings, key=_rank):
                parts.append(
                    f"| {finding.severity.value} | {finding.check} | {finding.line or ''} | {_cell(finding.message)} |"
                )
            parts.append("")
        if drift.changes:
            parts.append("**Needs re-verification on hardware:**\n")
            parts.append("| block | line | change | what changed |")
            parts.append("|---|---|---|---|")
            for change in drift.changes:
                line = f"{change.line} (base)" if change.change == "removed" else str(change.line)
                parts.append(
                    f"| `{_cell(change.block)}` | {line} | {change.change} | {_cell(', '.join(change.what))} |"
                )
            parts.append("")
        if not drift.findings and not drift.changes:
            parts.append("No drift found.\n")
    return fit_summary("\n".join(parts) + "\n", "the job log")


def annotation_lines(drifts: Sequence[GuideDrift]) -> list[str]:
    """`::error`/`::warning`/`::notice` lines on the guides' lines: the most useful first, at most 10 of each."""
    lines = []
    shown = {severity: 0 for severity in Severity}
    for finding in sorted((f for d in drifts for f in d.findings), key=_rank):
        if shown[finding.severity] < MAX_ANNOTATIONS:
            shown[finding.severity] += 1
            title = f"guide drift: {finding.check}"
            lines.append(annotation(finding.severity.value, finding.file, finding.line, title, finding.message))
    for change in (c for d in drifts for c in d.changes if c.change != "removed"):
        if shown[Severity.NOTICE] < MAX_ANNOTATIONS:
            shown[Severity.NOTICE] += 1
            what = f": {', '.join(change.what)}" if change.what else ""
            message = f"{change.block} {change.change}{what}; it needs re-verification on hardware"
            lines.append(annotation("notice", change.file, change.line, "guide drift: re-verify", message))
    return lines
