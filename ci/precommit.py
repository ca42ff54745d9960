"""Command line: `python -m ci.precommit FILE ...` checks the guides among staged files, running nothing of them.

The entry of the pre-commit hook `guide-guard-check` (.pre-commit-hooks.yaml at the repository root):
pre-commit passes the staged Markdown files. A file is a guide when it has something to run in the dialect
it is read in (a labelled block for the label contract; `--dialect`, else the dialect of the registry entry
that names it, the front matter's ci.dialect winning, as in ci.run), or when the registry (guides.yaml in
the current directory, when there is one) names it; any other file passes without a word. Each guide gets the two checks of `python -m ci.drift` that run nothing from it and
need no network: the contract (what `python -m ci.run GUIDE --list` reports) and the static checks
(bash -n, shellcheck, compile(), the lessons of real nights). The block diff and the last-run re-check need a base revision and a
run, the pins the network: those stay with ci.drift on the pull request.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base.text import plural
from ci.cli import ExitCode, add_dialect_option, command_parser, dialect_problem, fail, guarded_command

if TYPE_CHECKING:
    from ci.maintain.drift import Finding
    from ci.maintain.guide import Reading

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.precommit",
        description=(
            "Check the guides among FILEs (Markdown with labelled blocks, or named in guides.yaml) as a "
            "pre-commit hook: document errors as `python -m ci.run GUIDE --list` reports them, and the static "
            "checks of ci.drift (bash -n, shellcheck, compile, the lessons of real nights). Nothing of a guide is run; "
            "no network is used."
        ),
        epilog=(
            "Exit status: 0 no error and no warning; 1 a guide has an error or a warning (pre-commit shows the"
            " output of a failing hook only, so a warning that passed would never be read); 2 usage error."
        ),
    )
    parser.add_argument(
        "files", nargs="*", metavar="FILE", help="the files to look at (pre-commit passes the staged ones)"
    )
    parser.add_argument(
        "--no-static", action="store_true", help="only the contract check: no bash -n, shellcheck or compile()"
    )
    parser.add_argument(
        "--registry",
        metavar="FILE",
        default="guides.yaml",
        help="the guide registry whose guides are checked even without a label, each in its entry's dialect"
        " (default: guides.yaml, when there)",
    )
    add_dialect_option(
        parser, default=None, said="default: as the registry entry that names the file says, else labels"
    )
    return parser


@guarded_command(closed_pipe_is_normal=True)
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_names_last(sys.argv[1:] if argv is None else argv))
    usage = dialect_problem(args.dialect)
    if usage is not None:
        return fail(usage, parser)
    from ci.cli import find_tool
    from ci.maintain.drift import Severity
    from ci.maintain.guide import reading_for

    missing = [name for name in args.files if not os.path.isfile(name)]
    if missing:
        return fail(f"no such file: {', '.join(missing)}", parser)
    registered, findings = _registered_guides(args.registry)
    shellcheck = None if args.no_static else find_tool("shellcheck")
    checked = 0
    for name in args.files:
        reading = reading_for(name, args.dialect, registered)
        found = _check_file(name, registered, reading, shellcheck=shellcheck, static=not args.no_static)
        if found is None:
            continue  # not a guide
        checked += 1
        findings += sorted(found, key=lambda finding: finding.line)
    for finding in findings:
        where = f"{finding.file}:{finding.line}" if finding.line else finding.file
        print(f"{finding.severity.value}: {where}: [{finding.check}] {finding.message}")
    if checked and shellcheck is None and not args.no_static:
        from ci.maintain.drift.check import NO_SHELLCHECK

        print(f"notice: {NO_SHELLCHECK}")
    errors = sum(1 for finding in findings if finding.severity is Severity.ERROR)
    warnings = sum(1 for finding in findings if finding.severity is Severity.WARNING)
    if checked or findings:
        to_fix = " and ".join(kind for kind, count in (("errors", errors), ("warnings", warnings)) if count)
        verdict = f"fix the {to_fix} above before committing" if to_fix else "no error"
        print(
            f"guide-guard: {plural(checked, 'guide')} checked, nothing run:"
            f" {plural(errors, 'error')}, {plural(warnings, 'warning')}; {verdict}"
        )
    # pre-commit shows a hook's output only when it fails: a warning that passed would never be read
    return ExitCode.FAILED if errors or warnings else ExitCode.OK


_OPTIONS = ("-h", "--help", "--version", "--no-static", "--registry", "--dialect")  # build_parser's
_TAKING_VALUES = ("--registry", "--dialect")


def _names_last(argv: Sequence[str]) -> list[str]:
    """ARGV with the file names after `--`, so that a name starting with a dash (`-x.md`) is a file, not an option.

    pre-commit passes the staged names after the hook's `args:`, without `--`. An argument starting with a dash
    is an option when it is one of ours (or an abbreviation argparse takes) or names no file; else it is a file.
    """
    options: list[str] = []
    names: list[str] = []
    rest = iter(argv)
    for argument in rest:
        flag, equals, _value = argument.partition("=")
        ours = flag == "-h" or (len(flag) > 2 and any(option.startswith(flag) for option in _OPTIONS))
        if argument == "--":
            names.extend(rest)
        elif ours or (argument.startswith("-") and not os.path.lexists(argument)):
            options.append(argument)
            if ours and any(option.startswith(flag) for option in _TAKING_VALUES) and not equals:
                # its value follows, whatever it looks like
                options.extend(list(itertools.islice(rest, 1)))
        else:
            names.append(argument)
    return [*options, "--", *names]


def _registered_guides(registry: str) -> tuple[dict[str, Reading], list[Finding]]:
    """The local guides the registry names, as real paths with their entries' dialect (none when there is no
    registry), and an error for each problem of the registry: the files an entry it cannot read names would pass
    unchecked."""
    from ci.github.registry.read import registered_readings
    from ci.maintain.drift import Finding, Severity

    readings, problems = registered_readings(registry)
    findings = [
        Finding(
            "registry",
            Severity.ERROR,
            problem.file,
            problem.line,
            f"{problem.message} (the guides it names may go unchecked; python -m ci.registry {registry} --check"
            " checks it whole)",
        )
        for problem in problems
    ]
    return readings, findings


def _check_file(
    name: str, registered: Mapping[str, Reading], reading: Reading, *, shellcheck: str | None, static: bool
) -> list[Finding] | None:
    """The findings of the contract (and static) check of the guide NAME, read as READING says; None when NAME is
    not a guide."""
    from ci.guide.dialects import chosen_dialect
    from ci.guide.model import DocumentError
    from ci.guide.parse import parse_guide
    from ci.guide.plan import guides_without_blocks
    from ci.guide.source import read_guide, read_local_guide
    from ci.maintain.drift import Finding, Severity, contract_findings, static_findings
    from ci.maintain.drift.findings import CONTRACT, document_error_findings
    from ci.maintain.drift.plain import plain_contract_findings
    from ci.maintain.drift.static import plain_static_findings
    from ci.maintain.guide import runs_something

    try:
        loose = read_local_guide(Path(name), name).decode("utf-8", errors="replace")
    except DocumentError as error:  # unreadable, too large
        return document_error_findings(name, error)
    if not runs_something(loose, name, reading.dialect) and os.path.realpath(name) not in registered:
        return None
    try:
        text = read_guide(name).text
        parsed = parse_guide(text, name)
        dialect = chosen_dialect(parsed, text.split("\n"), reading.dialect)
    except DocumentError as error:  # not UTF-8, too large; `auto` between two dialects
        return document_error_findings(name, error)
    if dialect == "labels":
        plan, findings = contract_findings(parsed)
    else:
        plan, findings = plain_contract_findings(text, name, dialect, reading.timeout_rules)
    if plan is not None:
        findings += [Finding(CONTRACT, Severity.ERROR, name, p.line, p.message) for p in guides_without_blocks([plan])]
    if static and dialect == "labels":
        findings += static_findings(parsed, shellcheck=shellcheck)
    elif static and plan is not None:
        findings += plain_static_findings(plan, text, shellcheck=shellcheck)
    return findings


if __name__ == "__main__":
    sys.exit(main())
