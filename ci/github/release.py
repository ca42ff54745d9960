"""Releases: whether a checkout can be released under a tag (its version, its changelog section, the docs' pins).

The checks are pure functions of the files' texts; `guide-guard-release check` reads the files, says what it
found, and passes the notes on.
The version policy these checks hold is docs/ci.md, "Releases and versions".
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.base import frozen
from ci.base.text import plural
from ci.cli import ExitCode, command_parser, fail, guarded_command, print_error
from ci.guide.model import Problem
from ci.report.github import output_entry

__all__ = [
    "CHANGELOG_FILE",
    "PINNING_DOCUMENTS",
    "VERSION_FILE",
    "ChangelogSection",
    "PinnedVersion",
    "ReleaseFiles",
    "build_parser",
    "changelog_sections",
    "declared_version",
    "main",
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


@frozen
class ChangelogSection:
    """One `## [VERSION] - DATE` section of the changelog."""

    version: str  # as the heading's brackets hold it: `0.2.0`, or `Unreleased`
    date: str  # what follows the heading's ` - ` (`2026-12-04` in a released section); "" when nothing does
    line: int  # the heading's line, 1-based
    body: str  # the section's text up to the next `## ` heading, without the blank lines at its ends


@frozen
class PinnedVersion:
    """A line of a document that tells a reader to pin guide-guard at a release (`# v0.2.0` after the commit)."""

    file: str  # the document, as shown in messages (`docs/ci.md`)
    line: int  # 1-based
    version: str  # the release it names, without its `v`


@frozen
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


def release_problems(version: str, files: ReleaseFiles, *, between_releases: bool = False) -> list[Problem]:
    """What keeps the checkout FILES from being released as VERSION (`0.2.0`), each at its file and line with
    the fix; [] when it can be. The tag's form is the caller's to check (tag_version).

    BETWEEN_RELEASES checks a checkout that was released as VERSION and has moved on since: entries under
    [Unreleased] wait there for the next release, where a release of VERSION would leave them out."""
    return [
        *_version_problems(version, files.version_source),
        *_changelog_problems(version, files.changelog),
        *([] if between_releases or files.changelog is None else _unreleased_problems(version, files.changelog)),
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


def _unreleased_problems(version: str, text: str) -> list[Problem]:
    """Entries under [Unreleased]: released as VERSION, their changes would ship without being in its notes."""
    problems = []
    for section in changelog_sections(text):
        # its `### Added`-like headings alone are no entry: Keep a Changelog keeps them ready
        entries = [line for line in section.body.splitlines() if line.strip() and not line.startswith("#")]
        if section.version.lower() == "unreleased" and entries:
            problems.append(
                Problem(
                    CHANGELOG_FILE,
                    section.line,
                    f"[Unreleased] holds entries: the changes they name would ship in {version} without being in"
                    f" its notes; move them into the section of {version} (the release commit does), leaving"
                    " `## [Unreleased]` empty",
                )
            )
    return problems


def _is_date(text: str) -> bool:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


# The documents whose lines show a reader which release to pin (`uses: OWNER/guide-guard@SHA # v0.2.0`).
PINNING_DOCUMENTS = ("README.md", "action.yml", "docs/*.md")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.github.release",
        description="Check that a guide-guard checkout can be released under a tag (docs/ci.md, Releases and versions).",
        epilog="Exit status: 0 it can; 2 usage error, or what keeps it from being released (each with file:line).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="the tag names ci/__init__.py's version, CHANGELOG.md has a dated section for it, the docs pin it",
        description=(
            f"Check that TAG is v and {VERSION_FILE}'s __version__, that {CHANGELOG_FILE} has a dated section for"
            f" that version, and that every line of {', '.join(PINNING_DOCUMENTS)} that pins guide-guard at a"
            " release (`# vX.Y.Z`) names it. Under GitHub Actions, the step outputs tag, version and notes (the"
            " section's text) are written."
        ),
    )
    # its form is checked after parsing, so that a workflow's `--tag "$TAG"` parses for the wiring tests too
    check.add_argument("--tag", required=True, help="the release's tag, v and its version (v0.2.0)")
    check.add_argument(
        "--root", type=Path, default=Path("."), metavar="DIR", help="the checkout (default: the current directory)"
    )
    check.add_argument(
        "--new-tag",
        nargs="?",
        const="true",
        default="false",
        choices=("true", "false"),
        help=(
            "the tag must not exist yet in the checkout's git repository (a release by hand makes it; the"
            " checkout needs its tags: actions/checkout with fetch-tags: true); `--new-tag false` is the default,"
            " for a workflow to pass the expression's value"
        ),
    )
    check.add_argument(
        "--between-releases",
        action="store_true",
        help=(
            "the checkout was released as TAG and moved on: entries under [Unreleased], which a release refuses,"
            " are allowed (for a test that runs the check on every change)"
        ),
    )
    return parser


def _read(path: Path) -> str | None:
    """PATH's text; None when there is no such file."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _read_release_files(root: Path) -> ReleaseFiles:
    """The texts of the checkout at ROOT that a release is checked against. OSError (other than a missing file)."""
    documents = sorted({path for pattern in PINNING_DOCUMENTS for path in root.glob(pattern) if path.is_file()})
    return ReleaseFiles(
        version_source=_read(root / VERSION_FILE),
        changelog=_read(root / CHANGELOG_FILE),
        documents={path.relative_to(root).as_posix(): path.read_text(encoding="utf-8") for path in documents},
    )


def _existing_tag(root: Path, tag: str) -> str | None:
    """Why TAG cannot be made in the git repository at ROOT (it exists, or git cannot say); None when it can."""
    try:
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        return f"--new-tag: cannot run git to look for the tag {tag}: {exc.strerror or exc}"
    if found.returncode == 0:
        return (
            f"the tag {tag} already exists (on commit {found.stdout.strip()[:12]}), and a release by hand makes its"
            " own tag: re-run the release that its push started, or release the next version"
        )
    if found.returncode != 1 or found.stderr.strip():
        reason = found.stderr.strip() or f"git exited with {found.returncode}"
        return f"--new-tag: cannot look for the tag {tag} in {root}: {reason} (run it in a git checkout)"
    return None


def _check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ExitCode:
    version = tag_version(args.tag)
    if version is None:
        return fail(
            f"--tag {args.tag!r} is not a release tag: write v and the version as {VERSION_FILE} holds it,"
            " MAJOR.MINOR.PATCH (v0.2.0)",
            parser,
        )
    try:
        files = _read_release_files(args.root)
    except (OSError, UnicodeDecodeError) as exc:
        print_error(f"cannot read the checkout at {args.root}: {exc}")
        return ExitCode.USAGE
    problems = [str(problem) for problem in release_problems(version, files, between_releases=args.between_releases)]
    if args.new_tag == "true":
        made = _existing_tag(args.root, args.tag)
        if made is not None:
            problems.append(made)
    if problems:
        for problem in problems:
            print_error(problem)
        print_error(f"{args.tag} cannot be released: {plural(len(problems), 'problem')} to fix first")
        return ExitCode.USAGE
    [section] = [s for s in changelog_sections(files.changelog or "") if s.version == version]
    pins = [pin for file, text in files.documents.items() for pin in pinned_versions(file, text)]
    print(
        f"{args.tag} can be released: {VERSION_FILE} says {version}, {CHANGELOG_FILE}:{section.line} is its section"
        f" ({section.date}), {plural(len(pins), 'line')} of the docs pin{'s' if len(pins) == 1 else ''} it"
    )
    outputs_path = os.environ.get("GITHUB_OUTPUT")
    if outputs_path:
        entries = output_entry("tag", args.tag) + output_entry("version", version) + output_entry("notes", section.body)
        try:
            with open(outputs_path, "a", encoding="utf-8") as outputs:
                outputs.write(entries)
        except OSError as exc:
            print_error(f"cannot write the step outputs to {outputs_path}: {exc.strerror or exc}")
            return ExitCode.FAILED
    return ExitCode.OK


@guarded_command()
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return _check(args, parser)


if __name__ == "__main__":
    sys.exit(main())
