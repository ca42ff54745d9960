"""The upstream monitor's decision: whether a scheduled run of a guide is needed, and with which upstream ref (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ci.base import frozen
from ci.base.text import plural

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "FIRED",
    "QUIET",
    "SIGNALS",
    "SKIPPED",
    "STATE_VERSION",
    "UNKNOWN",
    "WATCHABLE",
    "Observations",
    "Release",
    "decide",
    "record_result",
    "upstream_drift",
]

STATE_VERSION = 1
SIGNALS = ("release", "branch", "guide", "model", "retry")  # highest first: the first that fires gives the reason
# The signals --signals may choose from; `retry` of a failed run always applies.
WATCHABLE = ("release", "branch", "guide", "model")
DEFAULT_MAX_RETRIES = 2
# what a signal says: it fired (a run is needed), stayed quiet, could not be looked up, or does not apply
FIRED, QUIET, UNKNOWN, SKIPPED = "fired", "quiet", "unknown", "skipped"


@frozen
class Release:
    """The upstream's newest release (or, without releases, its newest tag)."""

    ref: str  # the tag name: what UPSTREAM_REF becomes
    commit_sha: str | None  # the commit the tag points at; None when that lookup failed
    source: str  # "release" or "tag"
    note: str = ""  # why commit_sha is missing, if it is


@frozen
class Observations:
    """What the monitor saw this time. A lookup that failed has its value None and its error set."""

    guide: str  # as named on the command line
    guide_sha256: str
    repo: str | None  # ci.upstream.repo; None when the guide names none
    release: Release | None  # None: not configured, failed, or the repository has no release or tag
    release_error: str | None
    model: str | None  # ci.upstream.model
    model_sha: str | None
    model_error: str | None
    branch: str | None = None  # the branch of `repo` whose head commit is watched; None: not watched
    branch_sha: str | None = None
    branch_error: str | None = None
    watched: frozenset[str] = frozenset(WATCHABLE)  # the signals asked for; the others are skipped
    written_for: str | None = None  # ci.upstream.written_for: the upstream ref the guide's expected outputs follow


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "unknown"


def _signal(status: str, detail: str, **values: Any) -> dict[str, Any]:
    return {"status": status, "detail": detail, **values}


def upstream_drift(seen: Observations) -> str | None:
    """What differs between the ref the guide is written for and the upstream's latest release; None: nothing.

    Nothing differs when the guide names no ci.upstream.written_for, when the latest release is unknown
    (not watched, not found, or the lookup failed), or when it is the one the guide is written for.
    """
    if seen.written_for is None or seen.release is None or seen.written_for == seen.release.ref:
        return None
    return f"the guide is written for {seen.written_for}; upstream's latest {seen.release.source} is {seen.release.ref}"


def _release_signal(state: Mapping[str, Any], seen: Observations) -> dict[str, Any]:
    """The release signal; its detail also says how the latest release compares with ci.upstream.written_for."""
    signal = _release_finding(state, seen)
    if seen.written_for is None or signal["status"] not in (FIRED, QUIET) or seen.release is None:
        return signal
    drift = upstream_drift(seen)
    comparison = drift or f"the guide is written for {seen.written_for}, this {seen.release.source}"
    return {**signal, "detail": f"{signal['detail']}; {comparison}", "written_for": seen.written_for}


def _release_finding(state: Mapping[str, Any], seen: Observations) -> dict[str, Any]:
    previous = state.get("upstream") if isinstance(state.get("upstream"), dict) else None
    before = {k: previous.get(k) for k in ("repo", "ref", "commit_sha")} if previous else None
    if seen.repo is None:
        return _signal(SKIPPED, "the guide's front matter names no ci.upstream.repo")
    if seen.release_error is not None:
        return _signal(UNKNOWN, seen.release_error, previous=before)
    release = seen.release
    if release is None:
        return _signal(QUIET, f"{seen.repo} has no release or tag", previous=before)
    current = {"repo": seen.repo, "ref": release.ref, "commit_sha": release.commit_sha, "source": release.source}
    note = f" ({release.note})" if release.note else ""
    if before is None or before["repo"] != seen.repo or not before["ref"]:
        return _signal(
            FIRED,
            f"no earlier record of {seen.repo}: its latest {release.source} is {release.ref}{note}",
            current=current,
        )
    if before["ref"] != release.ref:
        detail = f"new upstream {release.source} {release.ref} of {seen.repo} (was {before['ref']}){note}"
        return _signal(FIRED, detail, current=current, previous=before)
    if before["commit_sha"] and release.commit_sha and before["commit_sha"] != release.commit_sha:
        detail = f"{release.ref} of {seen.repo} now points at {_short(release.commit_sha)} (was {_short(before['commit_sha'])})"
        return _signal(FIRED, detail, current=current, previous=before)
    return _signal(QUIET, f"{release.ref} is still the latest {release.source}{note}", current=current, previous=before)


def _branch_signal(state: Mapping[str, Any], seen: Observations) -> dict[str, Any]:
    previous = state.get("branch") if isinstance(state.get("branch"), dict) else None
    if seen.repo is None or seen.branch is None:
        return _signal(SKIPPED, "no branch head is watched (ci.monitor --branch)")
    if seen.branch_error is not None:
        return _signal(UNKNOWN, seen.branch_error, previous=previous)
    current = {"repo": seen.repo, "branch": seen.branch, "sha": seen.branch_sha}
    where = f"{seen.branch} of {seen.repo}"
    if previous is None or (previous.get("repo"), previous.get("branch")) != (seen.repo, seen.branch):
        return _signal(FIRED, f"no earlier record of {where}: its head is {_short(seen.branch_sha)}", current=current)
    if previous.get("sha") != seen.branch_sha:
        detail = f"new commit {_short(seen.branch_sha)} on {where} (was {_short(previous.get('sha'))})"
        return _signal(FIRED, detail, current=current, previous=previous)
    return _signal(QUIET, f"{where} is still at {_short(seen.branch_sha)}", current=current, previous=previous)


def _guide_signal(state: Mapping[str, Any], seen: Observations) -> dict[str, Any]:
    before = state.get("guide_sha256")
    if not before:
        return _signal(FIRED, "no earlier record of the guide's content", current=seen.guide_sha256)
    if before != seen.guide_sha256:
        detail = f"the guide changed (sha256 {_short(before)} -> {_short(seen.guide_sha256)})"
        return _signal(FIRED, detail, current=seen.guide_sha256, previous=before)
    return _signal(QUIET, "the guide is unchanged", current=seen.guide_sha256, previous=before)


def _model_signal(state: Mapping[str, Any], seen: Observations) -> dict[str, Any]:
    previous = state.get("model") if isinstance(state.get("model"), dict) else None
    if seen.model is None:
        return _signal(SKIPPED, "the guide's front matter names no ci.upstream.model")
    if seen.model_error is not None:
        return _signal(UNKNOWN, seen.model_error, previous=previous)
    current = {"id": seen.model, "sha": seen.model_sha}
    if previous is None or previous.get("id") != seen.model or not previous.get("sha"):
        return _signal(
            FIRED, f"no earlier record of {seen.model}'s revision (now {_short(seen.model_sha)})", current=current
        )
    if previous["sha"] != seen.model_sha:
        detail = f"{seen.model} has a new revision {_short(seen.model_sha)} (was {_short(previous['sha'])})"
        return _signal(FIRED, detail, current=current, previous=previous)
    return _signal(QUIET, f"{seen.model} is still at {_short(seen.model_sha)}", current=current, previous=previous)


def _on(ref: str | None) -> str:
    """Which ref a recorded run tested, for a detail: ' (on v0.4.0)', or nothing for a run without a ref."""
    return f" (on {ref})" if ref else ""


def _retry_signal(state: Mapping[str, Any], max_retries: int) -> dict[str, Any]:
    last = state.get("last_result") if isinstance(state.get("last_result"), dict) else None
    failures = int(state.get("failures_in_a_row") or 0)
    retries = int(state.get("retries_in_a_row") or 0)
    counts = {"failures_in_a_row": failures, "retries_in_a_row": retries, "max_retries": max_retries}
    if last is None:
        return _signal(QUIET, "no run recorded yet", **counts)
    if last.get("result") != "failed":
        return _signal(QUIET, f"the previous run passed{_on(last.get('ref'))}", **counts)
    if retries < max_retries:
        detail = f"the previous run failed{_on(last.get('ref'))}: retry {retries + 1} of {max_retries}"
        return _signal(FIRED, detail, **counts)
    detail = (
        f"the previous run failed {plural(failures, 'time')} in a row; "
        f"{_retries_spent(max_retries)} until something changes"
    )
    return _signal(QUIET, detail, **counts)


def _retries_spent(max_retries: int) -> str:
    """`all 2 retries are spent`, `its one retry is spent`, `no retry is allowed (--max-retries 0)`."""
    if max_retries == 0:
        return "no retry is allowed (--max-retries 0)"
    return "its one retry is spent" if max_retries == 1 else f"all {max_retries} retries are spent"


def _signals(state: Mapping[str, Any], seen: Observations, max_retries: int) -> dict[str, dict[str, Any]]:
    """Every signal's finding; one that was not asked for (--signals) is skipped, whatever it would say."""
    found = {
        "release": _release_signal(state, seen),
        "branch": _branch_signal(state, seen),
        "guide": _guide_signal(state, seen),
        "model": _model_signal(state, seen),
        "retry": _retry_signal(state, max_retries),
    }
    for name in WATCHABLE:
        if name not in seen.watched:
            found[name] = _signal(SKIPPED, f"not watched: {name} is not among the signals asked for (--signals)")
    return found


def _ref(state: Mapping[str, Any], seen: Observations) -> tuple[str | None, str | None]:
    """The upstream ref to test and its commit: the latest release's, else the watched branch's head commit,
    else the one recorded last time."""
    if seen.release is not None:
        return seen.release.ref, seen.release.commit_sha
    if seen.branch is not None:
        recorded: Mapping[str, Any] = state["branch"] if isinstance(state.get("branch"), dict) else {}
        sha = seen.branch_sha or recorded.get("sha")
        return sha, sha
    previous: Mapping[str, Any] = state["upstream"] if isinstance(state.get("upstream"), dict) else {}
    return previous.get("ref"), previous.get("commit_sha")


def _reason(signals: Mapping[str, Mapping[str, Any]]) -> str:
    fired = [name for name in SIGNALS if signals[name]["status"] == FIRED]
    unknown = [name for name in SIGNALS if signals[name]["status"] == UNKNOWN]
    if fired:
        also = f" (also: {', '.join(fired[1:])})" if len(fired) > 1 else ""
        return str(signals[fired[0]]["detail"]) + also
    return "nothing changed since the last check" + (f" (unknown: {', '.join(unknown)})" if unknown else "")


def decide(
    state: Mapping[str, Any], seen: Observations, *, max_retries: int, now: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The decision and the new state (pure: no I/O).

    A signal whose lookup failed is "unknown" and counts as not fired. The ref
    is the latest release's, else the watched branch's head, else the one recorded last time.
    """
    signals = _signals(state, seen, max_retries)
    fired = [name for name in SIGNALS if signals[name]["status"] == FIRED]
    ref, commit_sha = _ref(state, seen)
    decision = {
        "guide": seen.guide,
        "need_to_test": bool(fired),
        "ref": ref,
        "commit_sha": commit_sha,
        "reason": _reason(signals),
        "upstream_drift": upstream_drift(seen),
        "signals": signals,
        "checked_at": now,
    }
    new_state = dict(state)
    new_state.update(version=STATE_VERSION, guide=seen.guide, guide_sha256=seen.guide_sha256, checked_at=now)
    if seen.release is not None and seen.repo is not None and "current" in signals["release"]:
        new_state["upstream"] = signals["release"]["current"]
    if seen.branch is not None and seen.branch_sha is not None:
        new_state["branch"] = {"repo": seen.repo, "branch": seen.branch, "sha": seen.branch_sha}
    if seen.model is not None and seen.model_sha is not None:
        new_state["model"] = {"id": seen.model, "sha": seen.model_sha}
    if any(name in fired for name in WATCHABLE):
        new_state["retries_in_a_row"] = 0  # something changed: a new failure streak gets its own retries
    elif "retry" in fired:
        new_state["retries_in_a_row"] = int(state.get("retries_in_a_row") or 0) + 1
    new_state["last_decision"] = {k: decision[k] for k in ("need_to_test", "ref", "commit_sha", "reason", "checked_at")}
    return decision, new_state


def record_result(state: Mapping[str, Any], result: str, ref: str | None, *, now: str) -> dict[str, Any]:
    """The state after a finished run (pure): its outcome, and the failures in a row that retries count.

    REF is the upstream ref the run tested; None for a run without one (a guide that watches no upstream).
    """
    new_state = dict(state)
    new_state["version"] = STATE_VERSION
    new_state["last_result"] = {"result": result, "ref": ref, "recorded_at": now}
    if result == "passed":
        new_state["failures_in_a_row"] = 0
        new_state["retries_in_a_row"] = 0
    else:
        new_state["failures_in_a_row"] = int(state.get("failures_in_a_row") or 0) + 1
    return new_state
