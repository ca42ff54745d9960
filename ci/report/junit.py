"""JUnit XML: one testsuite per guide, one testcase per runnable block."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ci.model import BlockResult, GuideOutcome, Status
from ci.report.console import block_details
from ci.report.text import clean_text

__all__ = ["junit_xml", "write_junit"]


def _assert_never(value: NoReturn) -> NoReturn:
    raise AssertionError(f"unhandled status {value!r}")


def _testcase(result: BlockResult, classname: str) -> ET.Element:
    step = result.step
    case = ET.Element(
        "testcase",
        {
            "name": clean_text(f"{step.ordinal:03d} {step.label.value} {step.name}"),
            "classname": clean_text(classname),
            "file": clean_text(step.file),
            "line": str(step.line),
            "time": f"{result.duration_s:.3f}",
        },
    )
    details = "\n\n".join(f"--- {title}\n{clean_text(text)}" for title, text in block_details(result))
    message = clean_text(f"{result.status.value.replace('_', ' ')}: {result.message}")
    status = result.status
    if status is Status.PASSED:
        pass
    elif status is Status.FAILED or status is Status.MISMATCH or status is Status.TIMED_OUT:
        failure = ET.SubElement(case, "failure", {"message": message, "type": status.value})
        failure.text = details
    elif status is Status.ERROR:
        error = ET.SubElement(case, "error", {"message": message, "type": status.value})
        error.text = details
    elif status is Status.SKIPPED or status is Status.NOT_RUN:
        ET.SubElement(case, "skipped", {"message": message, "type": status.value})
    else:
        _assert_never(status)
    if status is Status.PASSED and details:
        ET.SubElement(case, "system-out").text = details
    return case


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
        for result in results:
            suite.append(_testcase(result, classname))
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document


def write_junit(path: Path, outcomes: Sequence[GuideOutcome]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(junit_xml(outcomes))
