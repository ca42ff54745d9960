"""Command line: `python -m ci.release check --tag vX.Y.Z`, whether a checkout can be released under that tag.

The release workflow (.github/workflows/release.yml) runs it before it makes the tag and the release; a
maintainer runs it before the release commit is pushed. docs/ci.md, "Releases and versions".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ci.cli import ExitCode, command_parser, fail, guarded_command, print_error
from ci.core.text import plural
from ci.maintain.release import (
    CHANGELOG_FILE,
    VERSION_FILE,
    ReleaseFiles,
    changelog_sections,
    pinned_versions,
    release_problems,
    tag_version,
)
from ci.report.github import output_entry

__all__ = ["PINNING_DOCUMENTS", "build_parser", "main"]

# The documents whose lines show a reader which release to pin (`uses: OWNER/guide-guard@SHA # v0.2.0`).
PINNING_DOCUMENTS = ("README.md", "action.yml", "docs/*.md")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.release",
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
    problems = [str(problem) for problem in release_problems(version, files)]
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
