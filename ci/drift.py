"""Command line: `python -m ci.drift --base REV [GUIDE ...]` checks changed guides on a pull request without running them."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.cli import ExitCode, add_dialect_option, command_parser, dialect_problem, fail, guarded_command, print_error

if TYPE_CHECKING:
    from ci.maintain.drift import GuideDrift
    from ci.maintain.guide import Reading

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.drift",
        description=(
            "Check changed guides without running them: contract errors, bash -n/shellcheck/compile and the "
            "lessons of real nights, blocks changed against REV, changed expected output against the last run, "
            "pinned versions."
        ),
        epilog="Exit status: 0 no error; 1 contract, static-check or last-run errors (with --strict, warnings too); 2 usage error.",
    )
    parser.add_argument(
        "guides",
        nargs="*",
        metavar="GUIDE",
        help="guides to check (default: the changed *.md that have something to run in their dialect)",
    )
    parser.add_argument("--base", required=True, metavar="REV", help="the revision to compare with (e.g. origin/main)")
    last_run = parser.add_mutually_exclusive_group()
    last_run.add_argument("--last-run", metavar="DIR", help="the output directory of an earlier run (results.json)")
    last_run.add_argument(
        "--last-run-artifact",
        metavar="NAME",
        help="the outputs of the newest run that uploaded the artifact NAME-attempt-N to $GITHUB_REPOSITORY "
        "(token: $GITHUB_TOKEN or $GH_TOKEN), downloaded when an expected output changed",
    )
    parser.add_argument("--no-pins", action="store_true", help="do not compare pinned versions with PyPI")
    parser.add_argument("--strict", action="store_true", help="make every warning an error (exit 1)")
    add_dialect_option(
        parser,
        default=None,
        said="default: as the registry entry that names the guide says, else labels",
    )
    parser.add_argument(
        "--registry",
        metavar="FILE",
        default="guides.yaml",
        help="the guide registry whose entries' dialect and timeout_rules the guides they name are read with"
        " (default: guides.yaml, when there)",
    )
    return parser


@guarded_command(closed_pipe_is_normal=True)
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    usage = dialect_problem(args.dialect)
    if usage is not None:
        return fail(usage, parser)
    # imported only now, so that --help and usage errors start quickly
    from ci.cli import find_tool
    from ci.maintain.artifacts import LastRunArtifact
    from ci.maintain.drift import (
        GitError,
        PyPIVersions,
        annotation_lines,
        check_guides,
        console_report,
        guides_at_base,
        step_summary,
    )
    from ci.report.github import command_safe, in_github_actions

    repo = os.environ.get("GITHUB_REPOSITORY", "")
    if args.last_run_artifact and not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        message = "--last-run-artifact needs GITHUB_REPOSITORY=OWNER/NAME, the repository to look in (Actions sets it)"
        return fail(message, parser)
    reading, is_guide = _readings(args.registry, args.dialect)
    try:
        guides = guides_at_base(args.base, args.guides, is_guide)
    except GitError as exc:
        return fail(f"--base {args.base}: {exc}")
    missing = [path for path, _ in guides if not os.path.isfile(path)]
    if missing:
        return fail(f"no such guide: {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="guide-guard-last-run-") as scratch:
        artifact = LastRunArtifact(repo, args.last_run_artifact, Path(scratch)) if args.last_run_artifact else None
        drifts = check_guides(
            guides,
            shellcheck=find_tool("shellcheck"),
            pypi=None if args.no_pins else PyPIVersions(),
            last_run=args.last_run,
            artifact=artifact,
            readings={path: reading(path) for path, _ in guides},
        )
    if args.strict:
        _warnings_as_errors(drifts)
    if artifact is not None and artifact.fetched is not None and artifact.fetched.directory is not None:
        print(f"drift: the last run is {artifact.fetched.message}")
    if not drifts:
        print("drift: no changed guide with labelled blocks (nor one of another dialect with something to run)")
        return ExitCode.OK
    github = in_github_actions()
    report = console_report(drifts)
    sys.stdout.write(command_safe(report.rstrip("\n"), github) + "\n" if github else report)
    if github:
        for line in annotation_lines(drifts):
            print(line)
    _append_step_summary(step_summary(drifts))
    return ExitCode.FAILED if any(drift.failed for drift in drifts) else ExitCode.OK


def _readings(registry: str, dialect: str | None) -> tuple[Callable[[str], Reading], Callable[[str, str], bool]]:
    """How each guide is read (--dialect, else the REGISTRY entry's, else labels), and which changed Markdown
    files are guides: those the registry names, and those with something to run in their dialect (a labelled
    block for the label contract, a ```shell or ```pycon fence for the plain dialects)."""
    from ci.github.registry.read import registered_readings
    from ci.maintain.guide import reading_for, runs_something

    registered, problems = registered_readings(registry)
    for problem in problems:
        print_error(f"{problem} (the guides of that entry are read as --dialect says, else as labels)")

    def reading(path: str) -> Reading:
        return reading_for(path, dialect, registered)

    def is_guide(text: str, path: str) -> bool:
        return os.path.realpath(path) in registered or runs_something(text, path, reading(path).dialect)

    return reading, is_guide


def _warnings_as_errors(drifts: list[GuideDrift]) -> None:
    """--strict: each warning becomes an error, which fails the check."""
    from ci.maintain.drift import Severity

    for drift in drifts:
        drift.findings = [
            dataclasses.replace(finding, severity=Severity.ERROR) if finding.severity is Severity.WARNING else finding
            for finding in drift.findings
        ]


def _append_step_summary(summary: str) -> None:
    """Add the summary to $GITHUB_STEP_SUMMARY, when set; a file that cannot be written is said, not fatal."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(summary)
    except OSError as exc:
        print_error(f"the step summary could not be written to {path}: {exc.strerror or exc}")


if __name__ == "__main__":
    sys.exit(main())
