"""What the upstream looks like now: the latest release of a GitHub repository and a model's revision on the Hub."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
from packaging.version import InvalidVersion, Version

from ci.github.api import WebError, get_json, github_api_url, github_headers, timeout_s, waited_for_rate_limit
from ci.maintain.monitor import WATCHABLE, Observations, Release

__all__ = ["branch_head", "latest_release", "model_revision", "observe"]


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


def branch_head(repo: str, branch: str) -> str:
    """The commit sha at the head of BRANCH of REPO on GitHub; WebError says why there is no answer."""
    api = github_api_url()
    url = f"{api}/repos/{repo}/commits/{quote(branch, safe='')}"
    try:
        commit = get_json(url, service="GitHub API", headers=github_headers())
    except WebError as exc:
        if exc.not_found:
            raise WebError(
                f"no branch {branch} of {repo} on GitHub (404 from {api}); check the branch and repo", status=404
            ) from None
        raise
    sha = commit.get("sha") if isinstance(commit, dict) else None
    if not isinstance(sha, str) or not sha:
        raise WebError(f"malformed answer from GitHub API for {branch} of {repo}: no sha")
    return sha


def model_revision(model: str, revision: str | None = None) -> str:
    """The commit sha of `model` (at `revision`, default the main branch) on the Hugging Face Hub.

    Uses huggingface_hub's HfApi().model_info, at $HF_ENDPOINT when set.
    WebError says why there is no answer.
    """
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


def _looked_up(lookup: Any, *args: str) -> tuple[Any, str | None]:
    """(value, None), or (None, why) when the lookup failed: a lookup never crashes the monitor."""
    try:
        return lookup(*args), None
    except WebError as exc:
        return None, str(exc)
    except Exception as exc:  # the signal becomes unknown
        return None, f"{type(exc).__name__}: {exc}"


def observe(
    guide: str,
    guide_sha256: str,
    upstream: Mapping[str, str],
    *,
    branch: str | None = None,
    watched: frozenset[str] = frozenset(WATCHABLE),
) -> Observations:
    """Look up what is watched of UPSTREAM (repo, model, model_revision: the guide's ci.upstream or the command
    line's) and of BRANCH; a lookup that fails leaves its value None and says why. A signal not in WATCHED is
    not looked up. UPSTREAM's written_for is passed on as it is, for the release signal to compare."""
    repo = upstream.get("repo") or None
    model = upstream.get("model") or None
    release = release_error = model_sha = model_error = branch_sha = branch_error = None
    if repo and "release" in watched:
        release, release_error = _looked_up(latest_release, repo)
    if repo and branch and "branch" in watched:
        branch_sha, branch_error = _looked_up(branch_head, repo, branch)
    if model and "model" in watched:
        revision = upstream.get("model_revision") or None
        model_sha, model_error = _looked_up(lambda m: model_revision(m, revision), model)
    return Observations(
        guide,
        guide_sha256,
        repo,
        release,
        release_error,
        model,
        model_sha,
        model_error,
        branch=branch if repo and "branch" in watched else None,
        branch_sha=branch_sha,
        branch_error=branch_error,
        watched=watched,
        written_for=upstream.get("written_for") or None,
    )
