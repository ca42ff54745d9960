"""JUnit XML: one testsuite per guide, one testcase per runnable block."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ci.base.files import write_atomically
from ci.base.streams import read_view
from ci.base.text import clean_text
from ci.guide.model import Label, Status, Step
from ci.record.outcome import Attempt, BlockResult, GuideOutcome
from ci.report.details import attempt_summary, block_details
from ci.report.recap import with_reason

__all__ = ["junit_xml", "testcase_names", "write_junit"]


def _assert_never(value: NoReturn) -> NoReturn:
    raise AssertionError(f"unhandled status {value!r}")


def _stable_name(step: Step) -> str:
    if step.label is Label.TEST and step.id:
        return step.id
    if step.id:
        return f"{step.label.value} {step.id}"
    if step.store:
        return f"{step.label.value} store={step.store}"
    # no name at all: the body's hash, which moves with the block wherever it goes in the guide
    return f"{step.label.value} sha256:{step.code_sha256[:12]}"


def testcase_names(steps: Sequence[Step]) -> list[str]:
    """The testcase names of a guide's blocks, in order: stable when blocks are added or removed elsewhere.

    Test-report tools (dorny/test-reporter, EnricoMi's publish-unit-test-result-action) follow a test
    through its history by class name and name, so an ordinal in the name would make every block after
    an inserted one look new. A `#test` is its id; a setup is its label with its id, else its store,
    else its body's hash. A name given twice (two setups storing the same name, two identical bodies)
    gets ` (2)`, ` (3)` on its later uses.
    """
    seen: Counter[str] = Counter()
    names = []
    for step in steps:
        name = _stable_name(step)
        seen[name] += 1
        names.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return names


def _testcase(result: BlockResult, classname: str, name: str) -> ET.Element:
    step = result.step
    case = ET.Element(
        "testcase",
        {
            "name": clean_text(name),
            "classname": clean_text(classname),
            "file": clean_text(step.file),
            "line": str(result.failure_line),  # a mismatch: its first failing expected line
            "time": f"{result.duration_s:.3f}",
        },
    )
    sections = block_details(result)
    details = "\n\n".join(f"--- {title}\n{clean_text(text)}" for title, text in sections)
    why = with_reason(result.message, result.reason)  # `exit 1: server never became ready`
    message = clean_text(f"{result.status.value.replace('_', ' ')}: {why}")
    status = result.status
    if status is Status.PASSED:
        pass
    elif status is Status.FAILED or status is Status.MISMATCH or status is Status.TIMED_OUT:
        failure = ET.SubElement(case, "failure", {"message": message, "type": status.value})
        failure.text = details
        _earlier_attempts(case, result, "rerunFailure")
    elif status is Status.ERROR:
        _earlier_attempts(case, result, "rerunFailure")  # the schema's order: before <error>
        error = ET.SubElement(case, "error", {"message": message, "type": status.value})
        error.text = details
    elif status is Status.SKIPPED or status is Status.NOT_RUN:
        ET.SubElement(case, "skipped", {"message": message, "type": status.value})
    else:
        _assert_never(status)
    if status is Status.PASSED:
        _earlier_attempts(case, result, "flakyFailure")
    if status is Status.PASSED and details:
        ET.SubElement(case, "system-out").text = details
    return case


def _earlier_attempts(case: ET.Element, result: BlockResult, tag: str) -> None:
    """One TAG element per earlier attempt of a retried block, as Maven Surefire writes reruns.

    `flakyFailure` under a block that passed in the end, `rerunFailure` under
    one that did not: each with its message and type, a `stackTrace` (what
    the attempt was, where its files are) and its output's `system-out` and
    `system-err` (bounded, as a block's sections are).
    """
    for attempt in result.attempts:
        message = clean_text(f"{attempt.status.value.replace('_', ' ')}: {attempt.message}")
        element = ET.SubElement(case, tag, {"message": message, "type": attempt.status.value})
        ET.SubElement(element, "stackTrace").text = clean_text(attempt_summary(attempt, result.step.merge_streams))
        for name, path, size in _streams(attempt):
            if size:
                ET.SubElement(element, name).text = clean_text(read_view(path).render())


def _streams(attempt: Attempt) -> tuple[tuple[str, str | None, int], ...]:
    return (
        ("system-out", attempt.stdout_path, attempt.stdout_bytes),
        ("system-err", attempt.stderr_path, attempt.stderr_bytes),
    )


def junit_xml(outcomes: Sequence[GuideOutcome]) -> bytes:
    """The JUnit document for a run, as UTF-8 bytes."""
    root = ET.Element("testsuites")
    for outcome in outcomes:
        results = outcome.results
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": clean_text(outcome.plan.guide),
                "tests": str(len(results)),
                "failures": str(sum(r.status in (Status.FAILED, Status.MISMATCH, Status.TIMED_OUT) for r in results)),
                "errors": str(sum(r.status is Status.ERROR for r in results)),
                "skipped": str(sum(r.status in (Status.SKIPPED, Status.NOT_RUN) for r in results)),
                "time": f"{outcome.duration_s:.3f}",
                "timestamp": outcome.started_at,
            },
        )
        classname = Path(outcome.plan.guide).stem or outcome.plan.guide
        names = testcase_names([result.step for result in results])
        for result, name in zip(results, names, strict=True):
            suite.append(_testcase(result, classname, name))
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document


def write_junit(path: Path, outcomes: Sequence[GuideOutcome]) -> None:
    """Write the JUnit report to `path`, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, junit_xml(outcomes))
