"""Each registry entry's guide, checked without running it: it parses, its blocks fit the job, its --only names blocks.

A guide named by URL is not fetched here: it must be https and pinned to a commit, so that what the
schedule runs is what was reviewed; it is parsed when the run checks it (`--list`) before any block.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ci.github.registry.model import BLOCK_HEADROOM_MINUTES, DEADLINE_MARGIN_MINUTES, Entry
from ci.guide.model import DocumentError, Plan, Problem
from ci.guide.plan import guides_without_blocks
from ci.guide.selection import only_idents, select_steps
from ci.maintain.guide import dialect_of, plan_without_running

__all__ = ["entry_problems"]

_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?\Z")


def _url_problems(entry: Entry) -> list[tuple[str, str]]:
    parts = urlsplit(entry.guide)
    if parts.scheme != "https":
        return [("guide", f"the guide {entry.guide} must be an https URL: plain http can be altered on the way")]
    if not any(_COMMIT.match(segment) for segment in parts.path.split("/")):
        message = (
            f"the guide {entry.guide} is not pinned to a commit: name the full commit sha in the URL, e.g."
            " https://raw.githubusercontent.com/OWNER/REPO/<40-hex sha>/docs/guide.md (a branch or tag can move)"
        )
        return [("guide", message)]
    return []


def _plan(entry: Entry, base: Path) -> tuple[Plan | None, list[tuple[str, str]]]:
    path = base / entry.guide
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        return None, [("guide", f"cannot read the guide {entry.guide} (in {base}): {reason}")]
    try:
        plan = plan_without_running(
            text.removeprefix("\ufeff"),
            entry.guide,
            source_path=str(path),
            dialect=entry.dialect,
            timeout_rules=entry.timeout_rules,
        )
    except DocumentError as error:
        return None, [("guide", f"the guide does not parse: {problem}") for problem in error.problems]
    problems = [("guide", f"the guide checks nothing: {p.message}") for p in guides_without_blocks([plan])]
    labels = dialect_of(text.removeprefix("\ufeff"), entry.guide, entry.dialect) == "labels"
    return plan, problems + _rules_problems(entry, read_as_labels=labels)


def _rules_problems(entry: Entry, *, read_as_labels: bool) -> list[tuple[str, str]]:
    """timeout_rules for a guide read as labelled blocks, which they never reach (ci.run only warns of them)."""
    if not entry.timeout_rules or not read_as_labels:
        return []
    message = (
        "timeout_rules sets limits by command kind for the plain dialects (fences, pycon), but the guide is read"
        " as labelled blocks, so the rules would be ignored: give the entry's dialect (fences or pycon) if the"
        " guide is written in one, else drop timeout_rules and give each block its limit with its label's"
        " timeout=, or the front matter's ci.timeout"
    )
    return [("timeout_rules", message)]


def _only_problems(entry: Entry, plan: Plan) -> list[tuple[str, str]]:
    if not entry.only:
        return []
    try:
        select_steps([plan], only=only_idents(entry.only, [plan]), preset_names=(name for name, _ in entry.set))
    except DocumentError as error:
        return [("only", f"only: {p.message.replace('--only ', '')}") for p in error.problems]
    return []


def _time_problems(entry: Entry, plan: Plan) -> list[tuple[str, str]]:
    """The run's deadline leaves the longest block its limit and the rest of the guide time around it; a skipped
    block (skip='...', a ```shell skip fence) never runs, so its limit does not count."""
    runnable = (step for step in plan.steps if step.skip_reason is None)
    longest = max(runnable, key=lambda step: step.timeout_s, default=None)
    if longest is None:
        return []
    deadline_minutes = entry.timeout_minutes - DEADLINE_MARGIN_MINUTES
    needed_minutes = math.ceil(longest.timeout_s / 60) + BLOCK_HEADROOM_MINUTES
    if deadline_minutes >= needed_minutes:
        return []
    message = (
        f"timeout_minutes {entry.timeout_minutes} gives the run a deadline of {deadline_minutes} min, and block"
        f" {longest.name} ({entry.guide}:{longest.line}) may take {longest.timeout_s / 60:g} min: give"
        f" timeout_minutes at least {needed_minutes + DEADLINE_MARGIN_MINUTES} ({BLOCK_HEADROOM_MINUTES} min for"
        f" the rest of the guide, {DEADLINE_MARGIN_MINUTES} for the job around the harness)"
    )
    return [("timeout_minutes", message)]


def _signal_problems(entry: Entry, front_matter: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each signal the entry asks for watches something the entry or the guide's front matter names."""
    upstream = entry.upstream
    repo = upstream.repo or front_matter.get("repo", "")
    model = upstream.model or front_matter.get("model", "")
    needs = {
        "release": (repo, "a repo (upstream.repo, or ci.upstream.repo in the guide)"),
        "branch": (repo and upstream.branch, "a repo and upstream.branch"),
        "model": (model, "a model (upstream.model, or ci.upstream.model in the guide)"),
    }
    problems = [
        ("upstream", f"the signal {signal} needs {what}")
        for signal in upstream.signals
        if signal in needs
        for present, what in [needs[signal]]
        if not present
    ]
    if upstream.branch and upstream.signals and "branch" not in upstream.signals:
        problems.append(("upstream", "upstream.branch is set, but branch is not among upstream.signals: add it"))
    return problems


def entry_problems(entry: Entry, registry_file: str, base: Path) -> list[Problem]:
    """Every problem of ENTRY's guide and of the settings that depend on it, at the entry's line."""
    if entry.is_url:  # not fetched: read as the entry's dialect says (its front matter's ci.dialect is not known)
        messages = _url_problems(entry) + _signal_problems(entry, {})
        messages += _rules_problems(entry, read_as_labels=entry.dialect == "labels")
    else:
        plan, messages = _plan(entry, base)
        if plan is not None:
            messages += _only_problems(entry, plan) + _time_problems(entry, plan)
            messages += _signal_problems(entry, plan.settings.upstream)
    return [Problem(registry_file, entry.line_of(key), f"entry {entry.name!r}: {message}") for key, message in messages]
