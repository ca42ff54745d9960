"""Command line: `python -m ci.monitor GUIDE --state FILE` says whether a scheduled run is needed, and records its outcome."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ci.base.files import write_atomically
from ci.cli import ExitCode, command_parser, fail, guarded_command, print_error
from ci.maintain.monitor import DEFAULT_MAX_RETRIES, SIGNALS, UNKNOWN, WATCHABLE, decide, record_result

__all__ = ["build_parser", "main"]


class _StateFileError(Exception):
    """The state file exists but holds no state; the message says which file and what to do."""


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.monitor",
        description=(
            "Decide whether a scheduled run of GUIDE is needed and with which upstream ref: "
            "a new upstream release, a changed guide, a new model revision, or a failed previous run (retried)."
        ),
        epilog="Exit status: 0 decided (whether or not a run is needed); 2 usage error, unreadable guide or state.",
    )
    parser.add_argument("guide", metavar="GUIDE", help="the guide (its front matter names ci.upstream.repo and .model)")
    parser.add_argument("--state", required=True, metavar="FILE", help="the monitor's state (JSON; created if missing)")
    parser.add_argument("--output", metavar="FILE", help="also write the decision JSON here")
    parser.add_argument(
        "--max-retries",
        type=int,
        default=DEFAULT_MAX_RETRIES,
        metavar="N",
        help=f"retry a failed run at most N times in a row (default {DEFAULT_MAX_RETRIES})",
    )
    parser.add_argument(
        "--record-result",
        choices=("passed", "failed"),
        help="record the outcome of the run that tested --ref, instead of deciding",
    )
    parser.add_argument(
        "--ref",
        metavar="REF",
        help="with --record-result: the upstream ref that run tested; empty when it had none (no ci.upstream)",
    )
    watch = parser.add_argument_group("what to watch (each overrides the guide's ci.upstream; guides.yaml passes them)")
    watch.add_argument(
        "--repo", metavar="OWNER/NAME", help="the GitHub repository whose releases or branch are watched"
    )
    watch.add_argument("--branch", metavar="NAME", help="watch the head commit of this branch of the repository")
    watch.add_argument("--model", metavar="ORG/NAME", help="the Hugging Face Hub model whose revision is watched")
    watch.add_argument("--model-revision", metavar="REV", help="a branch, tag or commit of the model")
    watch.add_argument(
        "--signals",
        metavar="LIST",
        help=f"the signals to use, comma-separated, from {','.join(WATCHABLE)} (default: all that have what they"
        " watch); retry always applies",
    )
    return parser


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _read_state(path: Path) -> dict[str, Any]:
    """The state file's content; {} when it does not exist yet. _StateFileError when it is not a state."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise _StateFileError(f"cannot read the state file {path}: {exc}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise _StateFileError(
            f"the state file {path} is not valid JSON (line {exc.lineno}): fix or delete it"
        ) from None
    if not isinstance(data, dict):
        raise _StateFileError(f"the state file {path} does not hold a JSON object: fix or delete it")
    return data


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write the state whole or not at all: a killed monitor never leaves half a state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", updating=True)


def _github_output(decision: Mapping[str, Any]) -> None:
    """need_to_test, ref, sha and reason as step outputs, when running under GitHub Actions."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return
    values = {
        "need_to_test": "true" if decision["need_to_test"] else "false",
        "ref": decision["ref"] or "",
        "sha": decision["commit_sha"] or "",
        "reason": decision["reason"],
    }
    with open(path, "a", encoding="utf-8") as handle:
        for name, value in values.items():
            handle.write(f"{name}={' '.join(str(value).split())}\n")  # one line each: no newline may end a value early


def _guide_facts(name: str) -> tuple[str, Mapping[str, str]]:
    """The guide's sha256 and its ci.upstream mapping; DocumentError when it cannot be read or planned."""
    from ci.guide.source import read_guide
    from ci.maintain.guide import plan_without_running

    source = read_guide(name)
    raw = Path(source.local_path).read_bytes() if source.local_path else source.text.encode("utf-8")
    plan = plan_without_running(source.text, source.name)  # a URL without its credentials
    return hashlib.sha256(raw).hexdigest(), plan.settings.upstream


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.max_retries < 0:
        return "--max-retries must be 0 or more"
    # An empty --ref is a run without an upstream ref (a guide that watches none, as the workflow passes it),
    # not a missing one: the caller still says which ref the run tested.
    if args.record_result and args.ref is None:
        return "--record-result needs --ref REF: the upstream ref the run tested (--ref '' for a run without one)"
    if args.ref is not None and not args.record_result:
        return "--ref goes with --record-result"
    unknown = sorted(set(_signal_names(args.signals)) - set(WATCHABLE))
    if unknown:
        return f"--signals: unknown {', '.join(unknown)}; choose from {', '.join(WATCHABLE)}"
    if {"release", "branch"} <= set(_signal_names(args.signals)):
        return "--signals: watch either the latest release (release) or a branch head (branch), not both"
    if "branch" in _signal_names(args.signals) and not args.branch:
        return "--signals branch needs --branch NAME"
    return None


def _signal_names(text: str | None) -> list[str]:
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def _watched(args: argparse.Namespace) -> frozenset[str]:
    """The signals asked for: --signals, else all; with --branch and no --signals, the branch instead of releases."""
    if args.signals:
        return frozenset(_signal_names(args.signals))
    return frozenset(WATCHABLE) - ({"release"} if args.branch else set())


def _decide(args: argparse.Namespace, state_path: Path, state: Mapping[str, Any]) -> ExitCode:
    from ci.guide.model import DocumentError
    from ci.guide.source import redact_url
    from ci.maintain.upstream import observe

    try:
        guide_sha256, upstream = _guide_facts(args.guide)
    except DocumentError as error:
        for problem in error.problems:
            print_error(str(problem))
        return ExitCode.USAGE
    shown = redact_url(args.guide)  # a token in the guide's URL stays out of the state and the log
    given = {"repo": args.repo, "model": args.model, "model_revision": args.model_revision}
    upstream = {**upstream, **{key: value for key, value in given.items() if value}}
    seen = observe(shown, guide_sha256, upstream, branch=args.branch, watched=_watched(args))
    decision, new_state = decide(state, seen, max_retries=args.max_retries, now=_now())
    for name in SIGNALS:
        signal = decision["signals"][name]
        if signal["status"] == UNKNOWN:
            print(
                f"warning: the {name} signal is unknown, so it counts as not fired: {signal['detail']}", file=sys.stderr
            )
    text = json.dumps(decision, indent=2, ensure_ascii=False)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    _github_output(decision)
    _write_json(state_path, new_state)
    verdict = "a run is needed" if decision["need_to_test"] else "no run needed"
    print(f"{shown}: {verdict} (ref {decision['ref'] or 'unknown'}): {decision['reason']}", file=sys.stderr)
    if decision["upstream_drift"]:
        print(
            f"note: {shown}: {decision['upstream_drift']}; a run against {decision['ref']} tests an upstream the "
            "guide's expected outputs were not written for (ci.upstream.written_for)",
            file=sys.stderr,
        )
    return ExitCode.OK


@guarded_command(closed_pipe_is_normal=True)
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = _usage_problem(args)
    if problem is not None:
        return fail(problem, parser)
    state_path = Path(args.state)
    try:
        state = _read_state(state_path)
    except _StateFileError as exc:
        return fail(str(exc))
    if args.record_result:
        new_state = record_result(state, args.record_result, args.ref or None, now=_now())
        _write_json(state_path, new_state)
        print(json.dumps(new_state["last_result"] | {"failures_in_a_row": new_state["failures_in_a_row"]}))
        return ExitCode.OK
    return _decide(args, state_path, state)


if __name__ == "__main__":
    sys.exit(main())
