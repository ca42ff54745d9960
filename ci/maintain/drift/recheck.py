"""Check 4, the last run: each changed `#test-result` re-checked against what its `#test` printed then."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from ci.base.text import masked_to_show_hidden, plural
from ci.expect.match import Blame
from ci.guide.model import Label, Plan
from ci.guide.placeholders import written_line
from ci.maintain.drift.findings import LAST_RUN, Finding, GuideDrift, Severity
from ci.maintain.lastrun import recheck
from ci.record import RecordError, read_run
from ci.record.outcome import BlockResult, Divergence

__all__ = ["QUOTED_CHARS", "last_run_findings"]

QUOTED_CHARS = 200  # a line quoted from the expected body or the run's output is cut to this many characters


def last_run_findings(
    plan: Plan,
    changed: Mapping[str, str | None],
    run_dir: str,
    drift: GuideDrift,
    *,
    unpacked_from: str | None = None,
) -> list[Finding]:
    """Re-check each changed `#test-result` against the stdout its `#test` printed in the last run.

    RUN_DIR is the run's output directory; UNPACKED_FROM, when it was unpacked from an artifact that is gone
    once the check ends, names that artifact. A finding quotes the expected line that no longer matches and
    what the run printed there, masked (the command's policy) and cut to QUOTED_CHARS, and names the run it read.
    """
    file = plan.guide
    run_named = run_dir if unpacked_from is None else f"the outputs/ directory of {unpacked_from}"
    try:
        run = read_run(run_dir)
    except RecordError as exc:
        return [Finding(LAST_RUN, Severity.WARNING, file, 0, f"--last-run: {exc}")]
    recorded = run.guide_for(file)
    if recorded is None:
        return [Finding(LAST_RUN, Severity.NOTICE, file, 0, f"the last run in {run_named} did not run this guide")]
    date = recorded.started_at or "the last run"
    findings = []
    for step in plan.steps:
        if step.id is None or step.id not in changed or step.expected is None or step.label is not Label.TEST:
            continue
        expected = step.expected
        block = recorded.test(step.id)
        where = f"#test-result id={step.id}"
        if block is None or not block.printed:
            findings.append(Finding(LAST_RUN, Severity.NOTICE, file, expected.line, _unprinted(where, block, date)))
            continue
        bodies = [body for body in (changed[step.id], expected.body) if body is not None]
        check = recheck(recorded, block, step, bodies)
        if check.missing:
            message = f"{where}: cannot re-check it: the last run's value of {', '.join(check.missing)} is unknown"
            findings.append(Finding(LAST_RUN, Severity.WARNING, file, expected.line, message))
            continue
        drift.rechecked += 1
        blame = check.blame()
        if blame is None:
            continue
        message = (
            f"{where}: this expected output no longer matches what the runner printed on {date}"
            f" (the run in {run_named}): {_what_differs(blame, check.expected_body)}"
        )
        if check.command_changed:
            message += "; its command changed too, so this needs a run on hardware to confirm"
        else:
            message += f"; see {_update_command(file, run_dir, unpacked_from, run_named)}"
        severity = Severity.WARNING if check.command_changed else Severity.ERROR
        line = expected.guide_line(written_line(expected.body, tuple(check.values.items()), blame.line))
        findings.append(Finding(LAST_RUN, severity, file, line, message))
    return findings


def _unprinted(where: str, block: BlockResult | None, date: str) -> str:
    """Why a changed result has nothing in the last run to be re-checked against: its #test did not print there."""
    if block is not None and block.kept_from is not None:  # a resumed run kept it: it printed in the earlier one
        earlier = block.kept_from
        return (
            f"{where}: not re-checked: the last run ({date}) resumed an earlier one and kept this #test, which passed"
            f" in the run in {earlier.directory} ({earlier.started_at}); re-check it with that run's outputs as"
            " --last-run"
        )
    status = block.status.value if block else "not in that run"
    return f"{where}: nothing to re-check it against: in the last run ({date}) its #test was {status}"


def _update_command(file: str, run_dir: str, unpacked_from: str | None, run_named: str) -> str:
    """The command that rewrites the guide's results from the run read: its directory, or the artifact's."""
    if unpacked_from is None:
        return f"python -m ci.run {shlex.quote(file)} --update --from-run {shlex.quote(run_dir)}"
    return f"python -m ci.run {shlex.quote(file)} --update --from-run OUTPUTS, OUTPUTS being {run_named}"


def _what_differs(blame: Blame, expected_body: str) -> str:
    """The expected line blamed and what the run printed there, each quoted, masked and bounded."""
    expected_lines = expected_body.split("\n")
    wanted = _quoted(expected_lines[blame.line - 1] if 0 < blame.line <= len(expected_lines) else "")
    match blame.divergence:
        case Divergence.MISSING:
            return f"its line {blame.line}, {wanted}, was never printed: the output ended before it"
        case Divergence.EXTRA:
            more = f" (and {plural(blame.more_lines, 'more line')})" if blame.more_lines else ""
            printed = _quoted(blame.actual_line)
            return f"the output went on after its last line ({blame.line}, {wanted}): {printed}{more}"
        case Divergence.DIFFERS:
            return f"its line {blame.line}, {wanted}, where the runner printed {_quoted(blame.actual_line)}"


def _quoted(line: str) -> str:
    """LINE masked (what a log hides written out, so a secret cut by an escape is masked whole), cut, then quoted."""
    shown = masked_to_show_hidden(line)
    return repr(shown[:QUOTED_CHARS] + "...") if len(shown) > QUOTED_CHARS else repr(shown)
