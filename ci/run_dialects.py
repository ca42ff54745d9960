"""`ci.run`'s options for how a guide is read: `--dialect`, and the plain dialects' limits by command kind."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_dialect_options"]


def add_dialect_options(parser: argparse.ArgumentParser) -> None:
    """How the guides are read: --dialect, and the plain dialects' limits by command kind (--timeout-rule)."""
    from ci.core.kinds import DIALECTS

    parser.add_argument(
        "--dialect",
        default="labels",
        metavar="{" + ",".join(DIALECTS) + "}",  # checked with the other usage problems (_combination_problem)
        help=(
            "how the guides are read (a guide's front matter ci.dialect wins): labels (the label contract, the"
            " default: blocks without a label never run), fences (every ```shell fence runs), pycon (a ```pycon"
            " console session), auto (labels when any label is there, else the one dialect whose fences are)"
        ),
    )
    parser.add_argument(
        "--timeout-rule",
        dest="timeout_rules",
        action="append",
        default=[],
        type=_timeout_rule,
        metavar="TEXT=T",
        help="fences and pycon: a block whose command holds TEXT gets limit T; repeatable, the first that matches wins",
    )


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
