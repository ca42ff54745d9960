"""Check 4, the last run: each changed `#test-result` re-checked against what its `#test` printed then."""

from __future__ import annotations

from collections.abc import Mapping

from ci.core.model import Label, Plan
from ci.core.plan import written_line
from ci.maintain.drift.findings import LAST_RUN, Finding, GuideDrift, Severity
from ci.maintain.lastrun import recheck
from ci.record import RecordError, read_run

__all__ = ["last_run_findings"]


def last_run_findings(plan: Plan, changed: Mapping[str, str | None], run_dir: str, drift: GuideDrift) -> list[Finding]:
    """Re-check each changed `#test-result` against the stdout its `#test` printed in the last run."""
    file = plan.guide
    try:
        run = read_run(run_dir)
    except RecordError as exc:
        return [Finding(LAST_RUN, Severity.WARNING, file, 0, f"--last-run: {exc}")]
    recorded = run.guide_for(file)
    if recorded is None:
        return [Finding(LAST_RUN, Severity.NOTICE, file, 0, f"the last run in {run_dir} did not run this guide")]
    date = recorded.started_at or "the last run"
    findings = []
    for step in plan.steps:
        if step.id is None or step.id not in changed or step.expected is None or step.label is not Label.TEST:
            continue
        expected = step.expected
        block = recorded.test(step.id)
        where = f"#test-result id={step.id}"
        if block is None or not block.printed:
            status = block.status.value if block else "not in that run"
            message = f"{where}: nothing to re-check it against: in the last run ({date}) its #test was {status}"
            findings.append(Finding(LAST_RUN, Severity.NOTICE, file, expected.line, message))
            continue
        bodies = [body for body in (changed[step.id], expected.body) if body is not None]
        check = recheck(recorded, block, step, bodies)
        if check.missing:
            message = f"{where}: cannot re-check it: the last run's value of {', '.join(check.missing)} is unknown"
            findings.append(Finding(LAST_RUN, Severity.WARNING, file, expected.line, message))
            continue
        drift.rechecked += 1
        unmatched = check.first_unmatched_line()
        if unmatched is None:
            continue
        message = f"{where}: this expected output no longer matches what the runner printed on {date}"
        if check.command_changed:
            message += " (its command changed too, so this needs a run on hardware to confirm)"
        else:
            message += f"; see python -m ci.run {file} --update --from-run DIR"
        severity = Severity.WARNING if check.command_changed else Severity.ERROR
        line = expected.line + written_line(expected.body, tuple(check.values.items()), unmatched)
        findings.append(Finding(LAST_RUN, severity, file, line, message))
    return findings
