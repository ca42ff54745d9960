"""Check 5, pins: versions pinned in a guide compared with the latest on PyPI (notices only)."""

from __future__ import annotations

import os
import re

from packaging.version import InvalidVersion, Version

from ci.base import frozen
from ci.github.api import WebError, get_json
from ci.maintain.drift.findings import PINS, Finding, Severity
from ci.maintain.drift.installs import install_arguments

__all__ = ["Pin", "PyPIVersions", "pin_findings", "pinned_versions"]


@frozen
class Pin:
    """A pinned version written in the guide."""

    kind: str  # "pip" (`pkg==X` given to a pip, uv or pipx install) or "image" (`registry/.../name:vX.Y`)
    name: str  # the PyPI project to compare with
    version: str  # as pinned (for an image: the version read from its tag)
    line: int
    text: str  # as written


_PIP_PIN = re.compile(r"(?<![\w.-])([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]\s]*\])?==([0-9][A-Za-z0-9.+!_-]*)")
# `uvx ruff@0.5.0`: a tool pinned the way uvx and `uv tool run` write it (the whole word, so that a URL's `@v1.2`
# is not one)
_TOOL_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]\s]*\])?@([0-9][A-Za-z0-9.+!_-]*)")
_IMAGE = re.compile(
    r"(?<![\w./:-])((?:[a-z0-9][a-z0-9.-]*(?::\d+)?/)(?:[a-z0-9._-]+/)*([a-z0-9][a-z0-9._-]*))"
    r":(v?(\d+(?:\.\d+)+)[A-Za-z0-9._+-]*)"
)


def pinned_versions(text: str) -> list[Pin]:
    """Pins written in the guide, in line order: `pkg==X` given to an install command (installs.py says which
    commands install, continuation lines included), and image tags anywhere."""
    found = [
        Pin("pip", pin.group(1), pin.group(2).rstrip(".,;:"), word.line, pin.group(0))
        for word in install_arguments(text)
        for pin in (*_PIP_PIN.finditer(word.text), *filter(None, [_TOOL_PIN.fullmatch(word.text)]))
    ]
    for number, line in enumerate(text.split("\n"), start=1):
        found += [
            Pin("image", image.group(2), image.group(4), number, image.group(0)) for image in _IMAGE.finditer(line)
        ]
    pins: dict[tuple[str, str, str], Pin] = {}
    for pin in sorted(found, key=lambda pin: pin.line):
        pins.setdefault((pin.kind, pin.name.lower(), pin.version), pin)
    return list(pins.values())


class PyPIVersions:
    """Latest versions on PyPI ($PYPI_URL, else the public index); after the first network failure it asks no more."""

    def __init__(self) -> None:
        self.base = (os.environ.get("PYPI_URL") or "https://pypi.org").rstrip("/")
        self.cache: dict[str, str | None] = {}
        self.failure: str | None = None
        self.failure_reported = False

    def latest(self, name: str) -> str | None:
        """The latest version, or None when PyPI has no such project; WebError on any other failure."""
        if name not in self.cache:
            try:
                data = get_json(f"{self.base}/pypi/{name}/json", service="PyPI")
            except WebError as exc:
                if not exc.not_found:
                    raise
                data = None
            if data is None:
                self.cache[name] = None
            else:
                version = data.get("info", {}).get("version") if isinstance(data, dict) else None
                if not isinstance(version, str) or not version:
                    raise WebError(f"malformed answer from PyPI for {name}: no info.version")
                self.cache[name] = version
        return self.cache[name]


def _older(pinned: str, latest: str) -> bool:
    try:
        return Version(pinned) < Version(latest)
    except InvalidVersion:
        return False


def pin_findings(text: str, file: str, pypi: PyPIVersions) -> list[Finding]:
    """Notices for pins older than PyPI's latest; one notice when PyPI cannot be asked."""
    findings = []
    for pin in pinned_versions(text):
        if pypi.failure is not None:
            break
        try:
            latest = pypi.latest(pin.name)
        except WebError as exc:
            pypi.failure = str(exc)
            break
        if latest is None:
            if pin.kind == "pip":
                message = f"{pin.text}: {pin.name} is not on PyPI ({pypi.base}), so its pin was not checked"
                findings.append(Finding(PINS, Severity.NOTICE, file, pin.line, message))
            continue
        if _older(pin.version, latest):
            if pin.kind == "pip":
                message = f"{pin.text} is pinned; the latest {pin.name} on PyPI is {latest}"
            else:
                message = (
                    f"image {pin.text} carries {pin.name} {pin.version}; the latest {pin.name} on PyPI is {latest}"
                )
            findings.append(Finding(PINS, Severity.NOTICE, file, pin.line, message))
    if pypi.failure is not None and not pypi.failure_reported:
        pypi.failure_reported = True
        message = f"pinned versions were not checked: {pypi.failure}"
        findings.append(Finding(PINS, Severity.NOTICE, file, 0, message))
    return findings
