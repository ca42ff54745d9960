"""A stand-in for GitHub's Actions artifacts API and its artifact storage, on two loopback servers."""

from __future__ import annotations

import hashlib
import io
import secrets
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

from web_stub import Reply, WebStub

REPO = "octo-org/guides"
REPO_ID = 4242
TOKEN = "ghs_stand-in-token"
DOCS = "https://docs.github.com/rest/actions/artifacts"


@dataclass
class StoredArtifact:
    """One artifact the stand-in lists and serves."""

    id: int
    name: str
    run_id: int
    branch: str
    created_at: str
    archive: bytes  # the zip served from the storage
    expired: bool = False
    head_repository_id: int = REPO_ID  # another id: the run came from a fork


def zip_of(files: dict[str, bytes]) -> bytes:
    """A zip with these members (names as given, even unsafe ones)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in files.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


def zip_of_directory(directory: Path) -> bytes:
    """The zip upload-artifact makes of a directory: its content at the top level of the archive."""
    return zip_of({str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()})


class GitHubArtifacts:
    """Answers like api.github.com for one repository's artifacts; the storage is another server (another port).

    Copied from GitHub's documented and observed behaviour:
    - `GET /repos/{owner}/{repo}`: the repository with `id` and `default_branch`; 404 `Not Found` for a private
      repository asked without a token (GitHub does not admit it exists).
    - `GET /repos/{owner}/{repo}/actions/artifacts?name=&per_page=&page=`: newest first, `total_count` counts
      every artifact the filter keeps (expired ones too), `per_page` defaults to 30 and is capped at 100, a page
      past the end is an empty list, and a `Link` header gives `next`/`last` (and `prev`/`first` after page 1).
    - `GET .../actions/artifacts/{id}/zip`: 302 to a signed storage URL with an empty body; 410 `Artifact has
      expired` for an expired one; 404 for an unknown id.
    - 401 `Bad credentials` for a wrong token; 403 `Resource not accessible by integration` for a token without
      `actions: read` (`forbidden`), with the rate-limit headers of a request that is not rate limited.
    Invented where GitHub's exact answer is not documented or not the point:
    - the `Link` URLs point at `/repositories/{id}/actions/artifacts`, a path other than the one asked for,
      as GitHub writes them for some listings (whether for this one is not documented): a client that rebuilt
      the next page's URL instead of following the link would fail here;
    - the download demands a token even for a public repository (401 `Requires authentication`), as GitHub
      does in practice, with a message of our own;
    - the storage answers 400 to a request that carries an Authorization header (a signed URL's storage rejects
      a second credential; the real status and XML body differ by storage provider), 403 to a wrong signature,
      and a signature never expires (the real one lasts a minute);
    - ids, dates and run numbers are whatever the test gives.
    """

    def __init__(self, api: WebStub, storage: WebStub, *, default_branch: str = "main") -> None:
        self.api = api
        self.storage = storage
        self.default_branch = default_branch
        self.artifacts: list[StoredArtifact] = []
        self.private = False
        self.forbidden = False
        self.signatures: dict[int, str] = {}
        api.responder = self.answer
        storage.responder = self.serve

    def add(self, artifact: StoredArtifact) -> StoredArtifact:
        self.artifacts.append(artifact)
        return artifact

    def _error(self, status: int, message: str) -> Reply:
        return Reply(status, {"message": message, "documentation_url": DOCS, "status": str(status)})

    def answer(self, path: str, headers: dict[str, str]) -> Reply | None:
        given = {name.lower(): value for name, value in headers.items()}.get("authorization")
        if given is not None and given not in (f"Bearer {TOKEN}", f"token {TOKEN}"):
            return self._error(401, "Bad credentials")
        if given is None and self.private:
            return self._error(404, "Not Found")
        parts = urlsplit(path)
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        if parts.path == f"/repos/{REPO}":
            return Reply(200, {"id": REPO_ID, "full_name": REPO, "default_branch": self.default_branch})
        if self.forbidden:
            limits = {"X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "990", "X-RateLimit-Reset": "1999999999"}
            return Reply(403, {"message": "Resource not accessible by integration", "documentation_url": DOCS}, limits)
        if parts.path in (f"/repos/{REPO}/actions/artifacts", f"/repositories/{REPO_ID}/actions/artifacts"):
            return self._listing(query)
        prefix = f"/repos/{REPO}/actions/artifacts/"
        if parts.path.startswith(prefix) and parts.path.endswith("/zip"):
            return self._download(parts.path[len(prefix) : -len("/zip")], given)
        return None  # WebStub's 404

    def _listing(self, query: dict[str, str]) -> Reply:
        kept = [a for a in self.artifacts if "name" not in query or a.name == query["name"]]
        kept.sort(key=lambda a: a.id, reverse=True)  # ids grow with time: newest first
        per_page = min(int(query.get("per_page", "30")), 100)
        page = int(query.get("page", "1"))
        shown = kept[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(kept) // per_page))
        links = []

        def link(number: int, rel: str) -> str:
            params = {**query, "per_page": str(per_page), "page": str(number)}
            return f'<{self.api.url}/repositories/{REPO_ID}/actions/artifacts?{urlencode(params)}>; rel="{rel}"'

        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        body = {"total_count": len(kept), "artifacts": [self._json(a) for a in shown]}
        return Reply(200, body, {"Link": ", ".join(links)} if links else {})

    def _json(self, artifact: StoredArtifact) -> dict[str, object]:
        base = f"{self.api.url}/repos/{REPO}/actions/artifacts/{artifact.id}"
        return {
            "id": artifact.id,
            "node_id": f"MDg6QXJ0aWZhY3Q{artifact.id}",
            "name": artifact.name,
            "size_in_bytes": len(artifact.archive),
            "url": base,
            "archive_download_url": f"{base}/zip",
            "expired": artifact.expired,
            "created_at": artifact.created_at,
            "expires_at": artifact.created_at,
            "updated_at": artifact.created_at,
            "digest": None,
            "workflow_run": {
                "id": artifact.run_id,
                "repository_id": REPO_ID,
                "head_repository_id": artifact.head_repository_id,
                "head_branch": artifact.branch,
                "head_sha": hashlib.sha1(str(artifact.run_id).encode()).hexdigest(),
            },
        }

    def _download(self, identifier: str, given: str | None) -> Reply:
        if given is None:
            return self._error(401, "Requires authentication")
        found = [a for a in self.artifacts if str(a.id) == identifier]
        if not found:
            return self._error(404, "Not Found")
        if found[0].expired:
            return self._error(410, "Artifact has expired")
        signature = self.signatures.setdefault(found[0].id, secrets.token_hex(8))
        location = f"{self.storage.url}/blob/{found[0].id}.zip?sig={signature}&se=2099-01-01"
        return Reply(302, b"", {"Location": location, "Content-Type": "text/html"})

    def serve(self, path: str, headers: dict[str, str]) -> Reply | None:
        if "authorization" in {name.lower() for name in headers}:
            return Reply(400, b"<Error><Code>InvalidAuthenticationInfo</Code></Error>", {"Content-Type": "text/xml"})
        parts = urlsplit(path)
        signature = parse_qs(parts.query).get("sig", [""])[-1]
        for artifact in self.artifacts:
            if parts.path == f"/blob/{artifact.id}.zip":
                if self.signatures.get(artifact.id) != signature:
                    return Reply(403, b"<Error><Code>AuthenticationFailed</Code></Error>", {"Content-Type": "text/xml"})
                return Reply(200, artifact.archive, {"Content-Type": "application/zip"})
        return None
