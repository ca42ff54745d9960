"""The newest run's outputs on GitHub: an artifact found by name through the artifacts API, downloaded, unpacked."""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from ci.base import frozen
from ci.github.api import WebError, download, get_json, get_json_pages, github_api_url, github_headers

__all__ = [
    "DOWNLOAD_LIMIT_BYTES",
    "MAX_ATTEMPTS",
    "UNPACK_LIMIT_BYTES",
    "ArchiveError",
    "Artifact",
    "FetchedRun",
    "LastRunArtifact",
    "Search",
    "attempt_name",
    "fetch_last_run",
    "find_artifact",
    "unpack_zip",
]

PER_PAGE = 100  # the most the API gives per page
MAX_PAGES = 10  # per name, newest first: 1000 artifacts, years of nightly runs
# Names asked for: REPORT-attempt-1, -2, ... up to this many re-runs of one run; the search stops earlier, at
# the first number no artifact of the repository has (see find_artifact).
MAX_ATTEMPTS = 10
DOWNLOAD_LIMIT_BYTES = 1024**3  # the zip; a run's reports are a few MiB, its collected logs at most some 100 MiB
UNPACK_LIMIT_BYTES = 2 * 1024**3  # what the zip may unpack to, counted as it is written (headers can lie)
MAX_MEMBERS = 100_000
SERVICE = "GitHub API"


class ArchiveError(Exception):
    """A downloaded artifact that is not unpacked: not a zip, a member outside the directory, or too large."""


@frozen
class Artifact:
    """One artifact as the artifacts API lists it."""

    id: int
    name: str  # e.g. specforge-npu-attempt-2
    created_at: str  # ISO 8601, UTC, as GitHub writes it
    size_bytes: int  # of the zip
    expired: bool
    download_url: str  # archive_download_url: answered with a redirect to the storage
    run_id: int | None  # workflow_run.id
    branch: str | None  # workflow_run.head_branch
    head_sha: str | None  # workflow_run.head_sha
    from_fork: bool  # the run's head repository is not this one

    def describe(self) -> str:
        """How messages name it: `artifact specforge-npu-attempt-1 of run 42 on main (abc1234, 2026-05-01T18:00:00Z)`."""
        run = f"run {self.run_id}" if self.run_id is not None else "an unknown run"
        branch = f" on {self.branch}" if self.branch else ""
        sha = f"{self.head_sha[:7]}, " if self.head_sha else ""
        return f"artifact {self.name} of {run}{branch} ({sha}{self.created_at})"


@frozen
class Search:
    """What find_artifact saw: the artifact it chose, and counts for saying why none was chosen."""

    artifact: Artifact | None  # the newest usable one, on the default branch if there is one there
    repo: str
    default_branch: str
    names: tuple[str, ...]  # the exact names asked for
    listed: int  # artifacts read under those names
    expired: int  # of those, expired ones
    cut_short: bool  # some name had more than MAX_PAGES pages: older artifacts were not read


@frozen
class FetchedRun:
    """The outcome of fetch_last_run: the outputs directory, or why there is none."""

    directory: Path | None  # the unpacked outputs (results.json and block outputs); None when none was had
    message: str  # which artifact it came from, or why there is none
    failed: bool  # the lookup went wrong (error answer, broken or unsafe zip), rather than finding nothing
    artifact: Artifact | None = None


def attempt_name(report_name: str, attempt: int) -> str:
    """The artifact name guide-run.yml uploads a run attempt's reports under."""
    return f"{report_name}-attempt-{attempt}"


def _malformed(what: str) -> WebError:
    return WebError(f"malformed answer from {SERVICE} for {what}")


def _artifact(raw: Any) -> Artifact:
    if not isinstance(raw, dict):
        raise _malformed("the artifacts: an artifact is not an object")
    found = raw.get("workflow_run")
    run: dict[str, Any] = found if isinstance(found, dict) else {}
    try:
        identifier, name, created = int(raw["id"]), str(raw["name"]), str(raw["created_at"])
        url, size = str(raw["archive_download_url"]), int(raw.get("size_in_bytes") or 0)
    except (KeyError, TypeError, ValueError):
        raise _malformed("the artifacts: an artifact lacks id, name, created_at or archive_download_url") from None
    repository, head_repository = run.get("repository_id"), run.get("head_repository_id")
    return Artifact(
        id=identifier,
        name=name,
        created_at=created,
        size_bytes=size,
        expired=raw.get("expired") is True,
        download_url=url,
        run_id=run["id"] if isinstance(run.get("id"), int) else None,
        branch=run["head_branch"] if isinstance(run.get("head_branch"), str) else None,
        head_sha=run["head_sha"] if isinstance(run.get("head_sha"), str) else None,
        from_fork=repository is not None and head_repository is not None and repository != head_repository,
    )


def _created(artifact: Artifact) -> datetime:
    try:  # Python 3.10's fromisoformat does not read the Z GitHub writes
        when = datetime.fromisoformat(artifact.created_at.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _newer(candidate: Artifact, best: Artifact | None) -> bool:
    return best is None or (_created(candidate), candidate.id) > (_created(best), best.id)


def _default_branch(api: str, repo: str, headers: Mapping[str, str]) -> str:
    try:
        data = get_json(f"{api}/repos/{repo}", service=SERVICE, headers=dict(headers))
    except WebError as exc:
        if exc.not_found:
            message = f"{repo} not found on GitHub (404 from {api}): a private repository needs a token (GITHUB_TOKEN)"
            raise WebError(message, status=404) from None
        raise
    branch = data.get("default_branch") if isinstance(data, dict) else None
    if not isinstance(branch, str) or not branch:
        raise _malformed(f"{repo}: no default_branch")
    return branch


def find_artifact(repo: str, report_name: str) -> Search:
    """The newest unexpired artifact REPORT-attempt-N of `repo`, preferring runs on the default branch.

    Each exact name is asked for with the API's `name` filter (newest first,
    100 a page), attempt 1 first: the answers hold only this report's
    artifacts, however many other workflows upload. Attempt numbers go up
    until one that no artifact of the repository has (expired ones count),
    at most MAX_ATTEMPTS. WebError when GitHub gives no usable answer.
    """
    api, headers = github_api_url(), github_headers()
    default_branch = _default_branch(api, repo, headers)
    best: Artifact | None = None  # on the default branch, from this repository
    fallback: Artifact | None = None  # the newest elsewhere
    names: list[str] = []
    listed = expired = 0
    cut_short = False
    for attempt in range(1, MAX_ATTEMPTS + 1):
        name = attempt_name(report_name, attempt)
        names.append(name)
        url = f"{api}/repos/{repo}/actions/artifacts?name={quote(name, safe='')}&per_page={PER_PAGE}"
        total = 0
        for number, (page, more) in enumerate(get_json_pages(url, service=SERVICE, headers=headers), start=1):
            if not isinstance(page, dict) or not isinstance(page.get("artifacts"), list):
                raise _malformed(f"{repo}'s artifacts named {name}: no 'artifacts' list")
            count = page.get("total_count")
            total = max(total, count if isinstance(count, int) else 0, len(page["artifacts"]))
            found_here = False
            for artifact in map(_artifact, page["artifacts"]):
                if artifact.name != name:  # the filter is exact; anything else is not this report's
                    continue
                listed += 1
                if artifact.expired:
                    expired += 1
                elif artifact.branch == default_branch and not artifact.from_fork:
                    if _newer(artifact, best):
                        best = artifact
                    found_here = True  # newest first: the rest under this name are older
                    break
                elif _newer(artifact, fallback):
                    fallback = artifact
            if found_here or not more:
                break
            if number == MAX_PAGES:
                cut_short = True
                break
        if total == 0:
            break
    return Search(
        artifact=best or fallback,
        repo=repo,
        default_branch=default_branch,
        names=tuple(names),
        listed=listed,
        expired=expired,
        cut_short=cut_short,
    )


def _member_path(name: str) -> PurePosixPath | None:
    """The member's relative path, or None when unpacking it would write outside the directory."""
    if not name or "\\" in name or name.startswith("/") or "\0" in name:
        return None
    path = PurePosixPath(name)
    if ".." in path.parts or ":" in path.parts[0]:
        return None
    return path


def unpack_zip(archive: Path, directory: Path, *, limit_bytes: int = UNPACK_LIMIT_BYTES) -> Path:
    """Unpack `archive` into `directory` (which must not exist yet) and return it; ArchiveError on a zip not to trust.

    Every member name is checked before anything is written: an absolute
    path, a `..`, a backslash or a drive letter refuses the whole archive.
    Members are written as plain files (a symbolic link's target becomes its
    content), and the bytes are counted as they are written, so a zip whose
    headers understate its size stops at `limit_bytes`; nothing is left then.
    """
    if directory.exists():
        raise ArchiveError(f"{directory} exists already: unpack into a new directory")
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            if len(members) > MAX_MEMBERS:
                raise ArchiveError(f"{archive.name} holds {len(members)} files, more than the {MAX_MEMBERS} unpacked")
            unsafe = [m.filename for m in members if _member_path(m.filename) is None]
            if unsafe:
                raise ArchiveError(f"{archive.name} would write outside its directory ({unsafe[0]!r}); not unpacked")
            declared = sum(m.file_size for m in members)
            if declared > limit_bytes:
                raise ArchiveError(f"{archive.name} unpacks to {declared} bytes, more than the {limit_bytes} allowed")
            directory.mkdir(parents=True)
            root = directory.resolve()
            written = 0
            for member in members:
                relative = _member_path(member.filename)
                assert relative is not None  # checked above
                target = root.joinpath(*relative.parts)
                # no member is ever written as a link, so only a way out the name check missed would fail here
                if not target.resolve().is_relative_to(root):
                    raise ArchiveError(f"{archive.name}: {member.filename!r} would land outside its directory")
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as source, open(target, "wb") as sink:
                    while chunk := source.read(1 << 20):
                        written += len(chunk)
                        if written > limit_bytes:
                            raise ArchiveError(f"{archive.name} unpacks to more than the {limit_bytes} bytes allowed")
                        sink.write(chunk)
    except ArchiveError:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, EOFError) as exc:
        # RuntimeError: an encrypted member; EOFError: a truncated one
        shutil.rmtree(directory, ignore_errors=True)
        raise ArchiveError(f"{archive.name} is not a readable zip: {exc}") from None
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise ArchiveError(f"cannot unpack {archive.name} into {directory}: {exc}") from None
    return directory


def _nothing_found(search: Search) -> str:
    names = search.names[0] if len(search.names) == 1 else f"{search.names[0]} ... {search.names[-1]}"
    if search.listed == 0:
        return f"{search.repo} has no artifact named {names}"
    parts = [f"{search.listed} listed", f"{search.expired} expired"]
    if search.cut_short:
        parts.append(f"only the newest {MAX_PAGES * PER_PAGE} of a name read")
    return f"{search.repo} has no unexpired artifact named {names} ({', '.join(parts)})"


def _outputs_directory(root: Path) -> Path | None:
    """Where results.json is: guide-run.yml uploads the report directory, with the run's outputs under outputs/."""
    for candidate in (root / "outputs", root):
        if (candidate / "results.json").is_file():
            return candidate
    return None


def fetch_last_run(
    repo: str,
    report_name: str,
    into: Path,
    *,
    download_limit_bytes: int = DOWNLOAD_LIMIT_BYTES,
    unpack_limit_bytes: int = UNPACK_LIMIT_BYTES,
) -> FetchedRun:
    """Find, download and unpack the newest run's outputs under `into`; never raises for what GitHub answers."""
    try:
        search = find_artifact(repo, report_name)
    except WebError as exc:
        return FetchedRun(None, f"cannot look up the artifacts {attempt_name(report_name, 1)}, ...: {exc}", True)
    artifact = search.artifact
    if artifact is None:
        return FetchedRun(None, _nothing_found(search), False)
    where = artifact.describe()
    if artifact.branch != search.default_branch or artifact.from_fork:
        where += f", the newest unexpired one: none is on {search.default_branch}"
    if artifact.size_bytes > download_limit_bytes:
        message = f"{where} is {artifact.size_bytes} bytes, more than the {download_limit_bytes} downloaded"
        return FetchedRun(None, message, True, artifact)
    archive = into / f"{artifact.id}.zip"
    try:
        into.mkdir(parents=True, exist_ok=True)
        download(
            artifact.download_url, archive, service=SERVICE, headers=github_headers(), limit_bytes=download_limit_bytes
        )
        root = unpack_zip(archive, into / str(artifact.id), limit_bytes=unpack_limit_bytes)
    except (WebError, ArchiveError, OSError) as exc:
        return FetchedRun(None, f"{where}: {exc}", True, artifact)
    finally:
        archive.unlink(missing_ok=True)
    outputs = _outputs_directory(root)
    if outputs is None:
        return FetchedRun(None, f"{where} holds no outputs/results.json", True, artifact)
    return FetchedRun(outputs, where, False, artifact)


class LastRunArtifact:
    """fetch_last_run on first use, and only once: a pull request that changes no expected output downloads nothing."""

    def __init__(self, repo: str, report_name: str, into: Path) -> None:
        self.repo = repo
        self.report_name = report_name
        self.into = into
        self.fetched: FetchedRun | None = None  # None until asked for

    def get(self) -> FetchedRun:
        if self.fetched is None:
            self.fetched = fetch_last_run(self.repo, self.report_name, self.into)
        return self.fetched
