"""`ci.run --secret NAME`: the secrets a guide's blocks need, masked in every report, a missing one said."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ci.cli import print_error

__all__ = ["add_secret_options", "missing_secrets", "take_secret_names"]


def add_secret_options(parser: argparse.ArgumentParser) -> None:
    """--secret NAME (repeatable, or names separated by commas)."""
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help=(
            "the blocks need the secret variable NAME: it is masked in every report as --mask-env masks, and"
            " an unset or empty one is a warning (an error under --strict); repeatable, or names separated by commas"
        ),
    )


def take_secret_names(args: argparse.Namespace) -> str | None:
    """--secret: the names checked, split at commas, and masked as --mask-env names are; what is wrong, if anything."""
    from ci.core.secrets import secret_name_problem, split_names

    args.secret = [name for given in args.secret for name in split_names(given)]
    problem = next(filter(None, map(secret_name_problem, args.secret)), None)
    if problem:
        return f"--secret: {problem}"
    args.mask_env = [*args.mask_env, *args.secret]
    return None


def missing_secrets(names: Sequence[str], strict: bool, github: bool) -> bool:
    """Say each secret of --secret that the environment lacks or leaves empty: a warning, or under --strict an
    error; whether the run stops for them (--strict)."""
    from ci.core.secrets import missing_secret_message
    from ci.report.github import annotation, command_safe

    missing = [name for name in dict.fromkeys(names) if not os.environ.get(name)]
    for name in missing:
        message = missing_secret_message(name)
        if strict:
            print_error(message)
        else:
            print(command_safe(f"warning: {message}", github), file=sys.stderr)
        if github:
            print(annotation("error" if strict else "warning", None, 0, "secret missing", message), file=sys.stderr)
    if missing and strict:
        print_error("--strict: a missing secret is an error; nothing was run")
    return bool(missing) and strict
