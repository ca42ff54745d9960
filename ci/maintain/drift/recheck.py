"""Check 4, the last run: each changed `#test-result` re-checked against what its `#test` printed then."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from ci.core.match import explain_mismatch, match_file, matches
from ci.core.model import Label, Plan
from ci.core.plan import substitute
from ci.maintain.drift.findings import LAST_RUN, Finding, GuideDrift, Severity
from ci.maintain.lastrun import RecordError, read_run, read_stdout, resolve_loads

__all__ = ["last_run_findings"]

EXPLAIN_LIMIT_BYTES = 1024 * 1024  # how much of a last-run output is read to say where it stops matching


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
            status = block.status if block else "not in that run"
            message = f"{where}: nothing to re-check it against: in the last run ({date}) its #test was {status}"
            findings.append(Finding(LAST_RUN, Severity.NOTICE, file, expected.line, message))
            continue
        loads = [(load.name, load.placeholder) for load in expected.loads]
        bodies = [body for body in (changed[step.id], expected.body) if body is not None]
        values, missing = resolve_loads(recorded, block, loads, bodies)
        if missing:
            message = f"{where}: cannot re-check it: the last run's value of {', '.join(missing)} is unknown"
            findings.append(Finding(LAST_RUN, Severity.WARNING, file, expected.line, message))
            continue
        body = substitute(expected.body, tuple(values.items())).rstrip("\n")
        drift.rechecked += 1
        if block.stdout_file is None:
            failed = None if matches("", body, expected.fuzzy) else 0
        else:
            failed = match_file(str(block.stdout_file), body, expected.fuzzy)
        if failed is None:
            continue
        try:
            actual = read_stdout(block, limit_bytes=EXPLAIN_LIMIT_BYTES)
        except (OSError, ValueError):
            actual = ""
        line = expected.line + explain_mismatch(actual, body, expected.fuzzy, failed).first_unmatched_line
        command_changed = block.code_sha256 and hashlib.sha256(step.body.encode()).hexdigest() != block.code_sha256
        message = f"{where}: this expected output no longer matches what the runner printed on {date}"
        if command_changed:
            message += " (its command changed too, so this needs a run on hardware to confirm)"
        else:
            message += f"; see python -m ci.run {file} --update --from-run DIR"
        severity = Severity.WARNING if command_changed else Severity.ERROR
        findings.append(Finding(LAST_RUN, severity, file, line, message))
    return findings
