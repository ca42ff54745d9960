"""How a guide is read, on every command that reads guides: `--dialect`, and the plain dialects' limits by command kind.

`ci.run` takes both options; `ci.rehearse` takes both and passes them on to the run it makes
(dialect_arguments); `ci.drift` and `ci.precommit` take `--dialect` alone (they run nothing, so no limit
matters to them).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ci.core.model import TimeoutRule

__all__ = ["add_dialect_option", "add_dialect_options", "dialect_arguments", "dialect_problem"]

_CHOICES = (
    "labels (the label contract: blocks without a label never run), fences (every ```shell fence runs), pycon"
    " (a ```pycon console session), auto (labels when any label is there, else the one dialect whose fences are)"
)


def add_dialect_option(parser: argparse.ArgumentParser, *, default: str | None = "labels", said: str = "") -> None:
    """--dialect, checked by dialect_problem with the other usage problems; SAID ends its help (what the default
    means on this command, when DEFAULT is None)."""
    from ci.core.kinds import DIALECTS

    parser.add_argument(
        "--dialect",
        default=default,
        metavar="{" + ",".join(DIALECTS) + "}",  # checked with the other usage problems (dialect_problem)
        help=f"how the guides are read (a guide's front matter ci.dialect wins): {_CHOICES}"
        + (f"; {said}" if said else "; default: labels"),
    )


def add_dialect_options(parser: argparse.ArgumentParser) -> None:
    """How the guides are read: --dialect, and the plain dialects' limits by command kind (--timeout-rule)."""
    add_dialect_option(parser)
    parser.add_argument(
        "--timeout-rule",
        dest="timeout_rules",
        action="append",
        default=[],
        type=_timeout_rule,
        metavar="TEXT=T",
        help="fences and pycon: a block whose command holds TEXT gets limit T; repeatable, the first that matches wins",
    )


def dialect_problem(dialect: str | None) -> str | None:
    """What is wrong with a --dialect value (None: not given), as a usage error; None when nothing is."""
    from ci.core.kinds import parse_dialect

    if dialect is None:
        return None
    try:
        parse_dialect(dialect)
    except ValueError as exc:
        return f"--dialect: {exc}"
    return None


def dialect_arguments(dialect: str, timeout_rules: Sequence[TimeoutRule]) -> list[str]:
    """The --dialect and --timeout-rule arguments that give another ci.run the same reading."""
    arguments = ["--dialect", dialect]
    for rule in timeout_rules:
        arguments += ["--timeout-rule", f"{rule.contains}={rule.timeout_s!r}"]
    return arguments


def _timeout_rule(text: str) -> Any:
    """A --timeout-rule value (TEXT=T, split at the last `=`) as a TimeoutRule."""
    from ci.core.model import TimeoutRule
    from ci.core.settings import parse_duration

    contains, separator, duration = text.rpartition("=")
    if not separator or not contains:
        raise argparse.ArgumentTypeError(f"{text!r} must read TEXT=T, e.g. 'cmake --build=2h'")
    try:
        return TimeoutRule(contains, parse_duration(duration))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from exc
