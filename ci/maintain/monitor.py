"""Upstream monitor: decide whether a scheduled run of a guide is needed, and with which upstream ref."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ci.cli import command_parser
from ci.maintain.web import WebError, get_json, github_api_url, github_headers, timeout_s, waited_for_rate_limit

__all__ = [
    "SIGNALS",
    "STATE_VERSION",
    "Observations",
    "Release",
    "build_parser",
    "decide",
    "latest_release",
    "main",
    "model_revision",
    "record_result",
]

STATE_VERSION = 1
SIGNALS = ("release", "guide", "model", "retry")  # highest first: the first that fires gives the reason
DEFAULT_MAX_RETRIES = 2
EXIT_OK, EXIT_USAGE = 0, 2
FIRED, QUIET, UNKNOWN, SKIPPED = "fired", "quiet", "unknown", "skipped"


@dataclass(frozen=True)
class Release:
    """The upstream's newest release (or, without releases, its newest tag)."""

    ref: str  # the tag name: what UPSTREAM_REF becomes
    commit_sha: str | None  # the commit the tag points at; None when that lookup failed
    source: str  # "release" or "tag"
    note: str = ""  # why commit_sha is missing, if it is


@dataclass(frozen=True)
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


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "unknown"


def _signal(status: str, detail: str, **values: Any) -> dict[str, Any]:
    return {"status": status, "detail": detail, **values}


def _release_signal(state: Mapping[str, Any], seen: Observations) -> dict[str, Any]:
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


def _retry_signal(state: Mapping[str, Any], max_retries: int) -> dict[str, Any]:
    last = state.get("last_result") if isinstance(state.get("last_result"), dict) else None
    failures = int(state.get("failures_in_a_row") or 0)
    retries = int(state.get("retries_in_a_row") or 0)
    counts = {"failures_in_a_row": failures, "retries_in_a_row": retries, "max_retries": max_retries}
    if last is None:
        return _signal(QUIET, "no run recorded yet", **counts)
    if last.get("result") != "failed":
        return _signal(QUIET, f"the previous run passed (on {last.get('ref')})", **counts)
    if retries < max_retries:
        detail = f"the previous run failed (on {last.get('ref')}): retry {retries + 1} of {max_retries}"
        return _signal(FIRED, detail, **counts)
    detail = (
        f"the previous run failed {failures} time{'s' if failures != 1 else ''} in a row; "
        f"all {max_retries} retries are spent until something changes"
    )
    return _signal(QUIET, detail, **counts)


def decide(
    state: Mapping[str, Any], seen: Observations, *, max_retries: int, now: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The decision and the new state (pure: no I/O).

    A signal whose lookup failed is "unknown" and counts as not fired. The ref
    is the latest release's, else the one recorded last time.
    """
    signals = {
        "release": _release_signal(state, seen),
        "guide": _guide_signal(state, seen),
        "model": _model_signal(state, seen),
        "retry": _retry_signal(state, max_retries),
    }
    fired = [name for name in SIGNALS if signals[name]["status"] == FIRED]
    unknown = [name for name in SIGNALS if signals[name]["status"] == UNKNOWN]
    previous: Mapping[str, Any] = state["upstream"] if isinstance(state.get("upstream"), dict) else {}
    ref: str | None = previous.get("ref")
    commit_sha: str | None = previous.get("commit_sha")
    if seen.release is not None:
        ref, commit_sha = seen.release.ref, seen.release.commit_sha
    if fired:
        reason = str(signals[fired[0]]["detail"])
        if len(fired) > 1:
            reason += f" (also: {', '.join(fired[1:])})"
    else:
        reason = "nothing changed since the last check"
        if unknown:
            reason += f" (unknown: {', '.join(unknown)})"
    decision = {
        "guide": seen.guide,
        "need_to_test": bool(fired),
        "ref": ref,
        "commit_sha": commit_sha,
        "reason": reason,
        "signals": signals,
        "checked_at": now,
    }
    new_state = dict(state)
    new_state.update(version=STATE_VERSION, guide=seen.guide, guide_sha256=seen.guide_sha256, checked_at=now)
    if seen.release is not None and seen.repo is not None:
        new_state["upstream"] = signals["release"]["current"]
    if seen.model is not None and seen.model_sha is not None:
        new_state["model"] = {"id": seen.model, "sha": seen.model_sha}
    if any(name in fired for name in ("release", "guide", "model")):
        new_state["retries_in_a_row"] = 0  # something changed: a new failure streak gets its own retries
    elif "retry" in fired:
        new_state["retries_in_a_row"] = int(state.get("retries_in_a_row") or 0) + 1
    new_state["last_decision"] = {k: decision[k] for k in ("need_to_test", "ref", "commit_sha", "reason", "checked_at")}
    return decision, new_state


def record_result(state: Mapping[str, Any], result: str, ref: str, *, now: str) -> dict[str, Any]:
    """The state after a finished run (pure): its outcome, and the failures in a row that retries count."""
    new_state = dict(state)
    new_state["version"] = STATE_VERSION
    new_state["last_result"] = {"result": result, "ref": ref, "recorded_at": now}
    if result == "passed":
        new_state["failures_in_a_row"] = 0
        new_state["retries_in_a_row"] = 0
    else:
        new_state["failures_in_a_row"] = int(state.get("failures_in_a_row") or 0) + 1
    return new_state


def _newest_tag(api: str, repo: str, headers: dict[str, str]) -> Release | None:
    """The tag with the highest version number (the first listed when none reads as a version)."""
    try:
        tags = get_json(f"{api}/repos/{repo}/tags?per_page=100", service="GitHub API", headers=headers)
    except WebError as exc:
        if exc.not_found:
            raise WebError(f"{repo} not found on GitHub (404 from {api}); check ci.upstream.repo", status=404) from None
        raise
    if not isinstance(tags, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("commit"), dict) for t in tags
    ):
        raise WebError(f"malformed answer from GitHub API for {repo}'s tags: expected a list of tags")
    if not tags:
        return None
    from packaging.version import InvalidVersion, Version

    def version_of(tag: dict[str, Any]) -> Version | None:
        try:
            return Version(str(tag["name"]).removeprefix("v"))
        except InvalidVersion:
            return None

    versioned = [(version, tag) for tag in tags if (version := version_of(tag)) is not None]
    newest = max(versioned, key=lambda pair: pair[0])[1] if versioned else tags[0]
    sha = newest["commit"].get("sha")
    return Release(ref=newest["name"], commit_sha=sha if isinstance(sha, str) else None, source="tag")


def latest_release(repo: str) -> Release | None:
    """Ask GitHub for `repo`'s latest release, else its newest tag; None when it has neither.

    The API base is $GITHUB_API_URL (https://api.github.com by default);
    $GITHUB_TOKEN (else $GH_TOKEN), when set, is sent as a bearer token. WebError says why an
    answer could not be had (rate limits included).
    """
    api = github_api_url()
    headers = github_headers()
    try:
        data = get_json(f"{api}/repos/{repo}/releases/latest", service="GitHub API", headers=headers)
    except WebError as exc:
        if exc.not_found:  # no published release (or no such repository: the tags will tell)
            return _newest_tag(api, repo, headers)
        raise
    tag = data.get("tag_name") if isinstance(data, dict) else None
    if not isinstance(tag, str) or not tag:
        raise WebError(f"malformed answer from GitHub API for {repo}'s latest release: no tag_name")
    try:
        commit = get_json(f"{api}/repos/{repo}/commits/{quote(tag, safe='')}", service="GitHub API", headers=headers)
    except WebError as exc:
        return Release(ref=tag, commit_sha=None, source="release", note=f"its commit is unknown: {exc}")
    sha = commit.get("sha") if isinstance(commit, dict) else None
    if not isinstance(sha, str) or not sha:
        return Release(ref=tag, commit_sha=None, source="release", note="its commit is unknown: no sha in the answer")
    return Release(ref=tag, commit_sha=sha, source="release")


def model_revision(model: str, revision: str | None = None) -> str:
    """The commit sha of `model` (at `revision`, default the main branch) on the Hugging Face Hub.

    Uses huggingface_hub's HfApi().model_info, at $HF_ENDPOINT when set.
    WebError says why there is no answer.
    """
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
    except ImportError:
        raise WebError("huggingface_hub is not installed: pip install huggingface_hub") from None
    endpoint = os.environ.get("HF_ENDPOINT") or None  # read here, not at huggingface_hub's import
    where = endpoint or "huggingface.co"
    wait_s = timeout_s()
    try:
        try:
            info = HfApi(endpoint=endpoint).model_info(model, revision=revision, timeout=wait_s)
        except HfHubHTTPError as exc:
            if exc.response.status_code != 429 or not waited_for_rate_limit(exc.response.headers):
                raise
            info = HfApi(endpoint=endpoint).model_info(model, revision=revision, timeout=wait_s)
    except RevisionNotFoundError:
        raise WebError(f"revision {revision!r} of {model} not found on the Hub ({where})", status=404) from None
    except RepositoryNotFoundError:
        message = f"{model} not found on the Hub ({where}); a private or gated model needs HF_TOKEN"
        raise WebError(message, status=404) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code
        retry_after = exc.response.headers.get("Retry-After")
        if status == 429:
            wait = f": retry after {retry_after} s" if retry_after else ""
            raise WebError(f"the Hub's rate limit hit for {model} (429){wait}", status=status) from None
        raise WebError(f"the Hub ({where}) answered {status} for {model}", status=status) from None
    except (ValueError, TypeError, KeyError) as exc:  # a body that is not the JSON of a model
        raise WebError(f"malformed answer from the Hub ({where}) for {model}: {type(exc).__name__}") from None
    except Exception as exc:  # httpx2's transport errors, which this module does not import
        if "timeout" in type(exc).__name__.lower():
            message = f"the Hub ({where}) did not answer within {wait_s:g} s for {model}"
        else:
            message = f"cannot reach the Hub ({where}) for {model}: {type(exc).__name__}: {exc}"
        raise WebError(message) from None
    sha = getattr(info, "sha", None)
    if not isinstance(sha, str) or not sha:
        raise WebError(f"malformed answer from the Hub ({where}) for {model}: no sha")
    return sha


def _observe(guide: str, guide_sha256: str, upstream: Mapping[str, str]) -> Observations:
    repo = upstream.get("repo") or None
    model = upstream.get("model") or None
    release = release_error = model_sha = model_error = None
    if repo:
        try:
            release = latest_release(repo)
        except WebError as exc:
            release_error = str(exc)
        except Exception as exc:  # never crash on a lookup: the signal becomes unknown
            release_error = f"{type(exc).__name__}: {exc}"
    if model:
        try:
            model_sha = model_revision(model, upstream.get("model_revision") or None)
        except WebError as exc:
            model_error = str(exc)
        except Exception as exc:  # never crash on a lookup: the signal becomes unknown
            model_error = f"{type(exc).__name__}: {exc}"
    return Observations(guide, guide_sha256, repo, release, release_error, model, model_sha, model_error)


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
    parser.add_argument("--ref", metavar="REF", help="with --record-result: the upstream ref that run tested")
    return parser


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _read_state(path: Path) -> dict[str, Any]:
    """The state file's content; {} when it does not exist yet. ValueError when it is not a state."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the state file {path}: {exc}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"the state file {path} is not valid JSON (line {exc.lineno}): fix or delete it") from None
    if not isinstance(data, dict):
        raise ValueError(f"the state file {path} does not hold a JSON object: fix or delete it")
    return data


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON through a temporary file, so a killed monitor never leaves half a state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)


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
    from ci.core.parse import parse_guide
    from ci.core.plan import build_plan
    from ci.core.source import read_guide
    from ci.maintain.update import loaded_names

    source = read_guide(name)
    raw = Path(source.local_path).read_bytes() if source.local_path else source.text.encode("utf-8")
    parsed = parse_guide(source.text, name)
    plan = build_plan(parsed, preset_names=loaded_names(parsed))
    return hashlib.sha256(raw).hexdigest(), plan.settings.upstream


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from ci.core.model import DocumentError

    if args.max_retries < 0:
        parser.error("--max-retries must be 0 or more")
    if args.record_result and not args.ref:
        parser.error("--record-result needs --ref REF: the upstream ref the run tested")
    if args.ref and not args.record_result:
        parser.error("--ref goes with --record-result")
    state_path = Path(args.state)
    try:
        state = _read_state(state_path)
    except ValueError as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.record_result:
        new_state = record_result(state, args.record_result, args.ref, now=_now())
        _write_json(state_path, new_state)
        print(json.dumps(new_state["last_result"] | {"failures_in_a_row": new_state["failures_in_a_row"]}))
        return EXIT_OK
    try:
        guide_sha256, upstream = _guide_facts(args.guide)
    except DocumentError as error:
        for problem in error.problems:
            print(f"[ERROR] {problem}", file=sys.stderr)
        return EXIT_USAGE
    seen = _observe(args.guide, guide_sha256, upstream)
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
    print(f"{args.guide}: {verdict} (ref {decision['ref'] or 'unknown'}): {decision['reason']}", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
