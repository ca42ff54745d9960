"""Releases: whether a checkout can be released under a tag (its version, its changelog section, the docs' pins).

Pure functions of the files' texts; ci.release reads the files, says what it found, and passes the notes on.
The version policy these checks hold is docs/ci.md, "Releases and versions".
"""

from __future__ import annotations

import ast
import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ci.core.model import Problem

__all__ = [
    "CHANGELOG_FILE",
    "VERSION_FILE",
    "ChangelogSection",
    "PinnedVersion",
    "ReleaseFiles",
    "changelog_sections",
    "declared_version",
    "pinned_versions",
    "release_problems",
    "tag_version",
]

VERSION_FILE = "ci/__init__.py"  # the one place of the version (pyproject.toml reads it from there)
CHANGELOG_FILE = "CHANGELOG.md"

# A release is MAJOR.MINOR.PATCH, each a number without leading zeros (semantic versioning's core form; no
# pre-release or build suffix, whose spellings differ between semantic versioning and Python's packaging).
VERSION = r"(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)"
TAG = re.compile(rf"v(?P<version>{VERSION})")
# Keep a Changelog's heading of a section: `## [0.2.0] - 2026-12-04`, or `## [Unreleased]`
SECTION_HEADING = re.compile(r"^##\s+\[(?P<version>[^\]]*)\](?:\s+-\s+(?P<date>\S.*?))?\s*$")
# A line that tells a reader which release of guide-guard to pin: `uses: OWNER/guide-guard@SHA # v0.2.0`, the
# reusable workflow's `OWNER/guide-guard/.github/workflows/NAME.yml@SHA # v0.2.0` too. A `# vX.Y.Z` names none.
PIN = re.compile(rf"guide-guard(?:/[\w./-]*)?@\S+\s+#\s*v(?P<version>{VERSION})(?![\w.])")


@dataclass(frozen=True)
class ChangelogSection:
    """One `## [VERSION] - DATE` section of the changelog."""

    version: str  # as the heading's brackets hold it: `0.2.0`, or `Unreleased`
    date: str  # what follows the heading's ` - ` (`2026-12-04` in a released section); "" when nothing does
    line: int  # the heading's line, 1-based
    body: str  # the section's text up to the next `## ` heading, without the blank lines at its ends


@dataclass(frozen=True)
class PinnedVersion:
    """A line of a document that tells a reader to pin guide-guard at a release (`# v0.2.0` after the commit)."""

    file: str  # the document, as shown in messages (`docs/ci.md`)
    line: int  # 1-based
    version: str  # the release it names, without its `v`


@dataclass(frozen=True)
class ReleaseFiles:
    """The texts of a checkout that a release is checked against."""

    version_source: str | None  # ci/__init__.py's text; None when the checkout has no such file
    changelog: str | None  # CHANGELOG.md's text; None when the checkout has none
    documents: Mapping[str, str]  # each document that may pin a release (README.md, action.yml, docs/*.md): text


def tag_version(tag: str) -> str | None:
    """The version a release tag names (`v0.2.0` -> `0.2.0`); None for anything that is not `vMAJOR.MINOR.PATCH`."""
    match = TAG.fullmatch(tag)
    return match["version"] if match else None


def declared_version(source: str) -> tuple[str, int] | None:
    """The string assigned to `__version__` at the top level of SOURCE, and its line; None when there is none."""
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    for statement in module.body:
        if (
            isinstance(statement, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "__version__" for target in statement.targets)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            return statement.value.value, statement.lineno
    return None


def changelog_sections(text: str) -> list[ChangelogSection]:
    """The `## [...]` sections of a changelog, in their order (newest first, as Keep a Changelog writes them)."""
    lines = text.splitlines()
    starts = [(number, match) for number, line in enumerate(lines) if (match := SECTION_HEADING.match(line))]
    sections = []
    for index, (number, match) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(lines)
        body_lines = _body_lines(lines[number + 1 : end])
        sections.append(
            ChangelogSection(match["version"].strip(), match["date"] or "", number + 1, "\n".join(body_lines).strip())
        )
    return sections


def _body_lines(lines: list[str]) -> list[str]:
    """LINES up to a `## ` heading of another form or a link reference definition (`[0.2.0]: https://...`),
    which Keep a Changelog puts after the last section."""
    taken = []
    for line in lines:
        if line.startswith("## ") or re.match(r"^\[[^\]]+\]:\s", line):
            break
        taken.append(line)
    return taken


def pinned_versions(file: str, text: str) -> list[PinnedVersion]:
    """Every line of TEXT that pins guide-guard at a named release (`OWNER/guide-guard@SHA # v0.2.0`)."""
    return [
        PinnedVersion(file, number, match["version"])
        for number, line in enumerate(text.splitlines(), start=1)
        for match in PIN.finditer(line)
    ]


def release_problems(version: str, files: ReleaseFiles) -> list[Problem]:
    """What keeps the checkout FILES from being released as VERSION (`0.2.0`), each at its file and line with
    the fix; [] when it can be. The tag's form is the caller's to check (tag_version)."""
    return [
        *_version_problems(version, files.version_source),
        *_changelog_problems(version, files.changelog),
        *[
            Problem(
                pin.file,
                pin.line,
                f"tells readers to pin v{pin.version}, and the release is v{version}: write `# v{version}` there",
            )
            for file, text in files.documents.items()
            for pin in pinned_versions(file, text)
            if pin.version != version
        ],
    ]


def _version_problems(version: str, source: str | None) -> list[Problem]:
    if source is None:
        return [Problem(VERSION_FILE, 0, "no such file: run the check at the root of a guide-guard checkout")]
    declared = declared_version(source)
    if declared is None:
        return [
            Problem(VERSION_FILE, 0, f'no `__version__ = "X.Y.Z"` at its top level: write `__version__ = "{version}"`')
        ]
    found, line = declared
    if found == version:
        return []
    return [
        Problem(
            VERSION_FILE,
            line,
            f'__version__ is "{found}", and the tag v{version} says {version}: set `__version__ = "{version}"`'
            f" in the release commit (or release v{found})",
        )
    ]


def _changelog_problems(version: str, text: str | None) -> list[Problem]:
    heading = f"## [{version}] - YYYY-MM-DD"
    if text is None:
        return [Problem(CHANGELOG_FILE, 0, f"no such file: write one, with a section `{heading}` saying what changed")]
    sections = [section for section in changelog_sections(text) if section.version == version]
    if not sections:
        return [
            Problem(
                CHANGELOG_FILE,
                0,
                f"no section for {version}: add `{heading}` (the release's day) above the earlier releases, with"
                " what changed (the entries under [Unreleased] move there)",
            )
        ]
    section, *repeated = sections
    problems = [
        Problem(
            CHANGELOG_FILE,
            again.line,
            f"a second section for {version} (the first is at line {section.line}): merge them into one",
        )
        for again in repeated
    ]
    if not _is_date(section.date):
        problems.append(
            Problem(
                CHANGELOG_FILE,
                section.line,
                f"the section of {version} has no date ({section.date or 'none'}): write `{heading}`, the release's day",
            )
        )
    if not section.body:
        problems.append(Problem(CHANGELOG_FILE, section.line, f"the section of {version} is empty: say what changed"))
    return problems


def _is_date(text: str) -> bool:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True
