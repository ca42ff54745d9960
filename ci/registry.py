"""Command line: `python -m ci.registry [FILE] --check | --matrix | --board PATH...` over the guide registry."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ci.base.text import plural
from ci.cli import ExitCode, command_parser, fail, guarded_command, print_error
from ci.github.registry import GROUPS, REGISTRY_FILE, Registry, RegistryError, load_registry

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.registry",
        description=(
            "Check the guide registry, print the GitHub Actions matrix of a schedule group, "
            "or render the status board from runs' results.json or status files."
        ),
        epilog="Exit status: 0 done; 2 usage error, or a registry or board input with problems (each with file:line).",
    )
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help=f"the registry (default: {REGISTRY_FILE} in the current directory)"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="check every entry and parse its guide (runs nothing)")
    action.add_argument("--matrix", action="store_true", help="print the matrix JSON of the entries selected")
    action.add_argument(
        "--board",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="render the board from runs' output directories (results.json) and status files or directories of them",
    )
    parser.add_argument("--group", choices=GROUPS, help="with --matrix: only this schedule group's entries")
    parser.add_argument(
        "--entry", action="append", default=[], metavar="NAME", help="with --matrix: only this entry (repeatable)"
    )
    parser.add_argument(
        "--previous", type=Path, metavar="DIR", help="with --board: the previous board's files (keeps last passed)"
    )
    parser.add_argument(
        "--output", type=Path, metavar="DIR", help="with --board: write board.md, NAME.json and NAME.badge.json here"
    )
    return parser


def _usage_problem(args: argparse.Namespace) -> str | None:
    if (args.group or args.entry) and not args.matrix:
        return "--group and --entry go with --matrix"
    if (args.previous or args.output) and not args.board:
        return "--previous and --output go with --board"
    return None


def _load(args: argparse.Namespace) -> Registry | None:
    """The registry; None for a board without one (no FILE given and no guides.yaml here). RegistryError."""
    path = Path(args.file or REGISTRY_FILE)
    if args.file is None and args.board and not path.exists():
        return None
    return load_registry(path, shown=args.file or REGISTRY_FILE)


def _check(registry: Registry) -> ExitCode:
    groups = ", ".join(f"{group}: {len(registry.selected(group))}" for group in GROUPS)
    print(f"{registry.file}: {len(registry.entries)} entries, every guide parses ({groups})")
    urls = [entry.name for entry in registry.entries if entry.is_url]
    if urls:
        print(
            f"not fetched: {', '.join(urls)} (named by URL; checked for https and a pinned commit only, "
            "parsed when their run starts)"
        )
    return ExitCode.OK


def _matrix(registry: Registry, args: argparse.Namespace) -> ExitCode:
    unknown = [name for name in args.entry if registry.entry(name) is None]
    if unknown:
        names = ", ".join(entry.name for entry in registry.entries)
        return fail(f"{registry.file} has no entry {', '.join(unknown)} (entries: {names})")
    print(json.dumps(registry.matrix(args.group, args.entry), separators=(",", ":"), ensure_ascii=False))
    return ExitCode.OK


def _board(registry: Registry | None, args: argparse.Namespace) -> ExitCode:
    from ci.github.registry.board import board_markdown, board_rows, write_board
    from ci.github.registry.status import BoardInputError, read_statuses

    names = {entry.guide: entry.name for entry in registry.entries} if registry is not None else {}
    try:
        current = read_statuses(args.board, names)
        previous = read_statuses([args.previous], names) if args.previous and args.previous.exists() else []
    except BoardInputError as exc:
        return fail(str(exc))
    rows = board_rows(current, previous, registry)
    markdown = board_markdown(rows)
    if args.output:
        try:
            write_board(args.output, rows, markdown)
        except OSError as exc:
            return fail(f"cannot write the board into {args.output}: {exc.strerror or exc}")
    print(markdown, end="")
    return ExitCode.OK


@guarded_command(closed_pipe_is_normal=True)
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _usage_problem(args)
    if problem is not None:
        return fail(problem, parser)
    try:
        registry = _load(args)
    except RegistryError as error:
        for found in error.problems:
            print_error(str(found))
        count = len(error.problems)
        print_error(
            f"{plural(count, 'problem')} in the registry: fix {'them' if count != 1 else 'it'} and run --check again"
        )
        return ExitCode.USAGE
    if args.check:
        assert registry is not None
        return _check(registry)
    if args.matrix:
        assert registry is not None
        return _matrix(registry, args)
    return _board(registry, args)


if __name__ == "__main__":
    sys.exit(main())
