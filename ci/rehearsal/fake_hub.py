"""The fake Hugging Face Hub: the endpoints huggingface_hub's snapshot_download uses, served on 127.0.0.1."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import struct
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ci.rehearsal.model import ASSETS

__all__ = ["EMBEDDING_TENSOR", "HUB_REPOS", "FakeHub", "HubAnswer", "HubRepo", "answer", "hub_repo", "hub_repositories"]

HUB_REPOS = {"Qwen/Qwen3.5-4B": ASSETS / "hub" / "Qwen" / "Qwen3.5-4B"}
EMBEDDING_TENSOR = "model.language_model.embed_tokens.weight"  # the guide's model.embedding_key
_SIMULATION_HEADER = "guide-guard rehearsal: fake Hugging Face Hub on loopback"
STALL_LIMIT_S = 900  # how long a stalled reply holds its connection at most (the rehearsal stops the Hub before)


@dataclass(frozen=True)
class HubRepo:
    """A model repository as the fake Hub serves it: files, their git blob ids, one commit."""

    files: Mapping[str, bytes]
    blob_ids: Mapping[str, str]
    commit: str


@dataclass(frozen=True)
class HubAnswer:
    """One reply of the fake Hub; X-Simulation and Content-Length are added when it is sent."""

    status: int
    body: bytes
    headers: Mapping[str, str]


def hub_repo(files: Mapping[str, bytes]) -> HubRepo:
    blob_ids = {path: hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() for path, data in files.items()}
    listing = "".join(f"{path} {blob_ids[path]}\n" for path in sorted(files))
    return HubRepo(files, blob_ids, hashlib.sha1(listing.encode()).hexdigest())


def tiny_safetensors() -> bytes:
    """A valid safetensors file of a few bytes: one float32 tensor named like the real embedding."""
    header = {
        "__metadata__": {"format": "pt", "simulation": "guide-guard rehearsal stand-in; not Qwen3.5-4B"},
        EMBEDDING_TENSOR: {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to a multiple of 8 bytes
    return struct.pack("<Q", len(text)) + text + bytes(32)


def hub_repositories() -> dict[str, HubRepo]:
    """The repositories of HUB_REPOS as files on disk, each with a tiny `model.safetensors` added."""
    repos = {}
    for repo_id, directory in HUB_REPOS.items():
        files = {path.relative_to(directory).as_posix(): path.read_bytes() for path in directory.rglob("*")}
        files["model.safetensors"] = tiny_safetensors()
        repos[repo_id] = hub_repo({name: data for name, data in files.items() if "__pycache__" not in name})
    return repos


# -- what the Hub answers: a pure function of the repositories and the request ---------------------


def answer(repos: Mapping[str, HubRepo], request_path: str, range_header: str) -> HubAnswer:
    """The reply to a HEAD or GET of request_path (with its Range header, or "").

    Model info (`/api/models/{repo}[/revision/{rev}]`), the file tree
    (`/api/models/{repo}/tree/{rev}`), and `/{repo}/resolve/{rev}/{file}` with
    the headers the client checks (X-Repo-Commit, ETag); anything else is a 404
    carrying the X-Error-Code the client turns into its own exceptions.
    """
    path = urllib.parse.unquote(urllib.parse.urlsplit(request_path).path)
    api = path.startswith("/api/models/")
    rest = path.removeprefix("/api/models/") if api else path.removeprefix("/")
    repo_id = next((r for r in repos if rest == r or rest.startswith(r + "/")), None)
    if repo_id is None:
        return _missing("RepoNotFound", f"[simulation] the fake Hub has no repository at {path}")
    repo = repos[repo_id]
    tail = rest[len(repo_id) :].lstrip("/")
    kind, _, tail = tail.partition("/")
    revision, _, file_path = tail.partition("/")
    if api and kind in ("", "revision"):
        if kind and revision not in ("main", repo.commit):
            return _missing("RevisionNotFound", f"no revision {revision}")
        return _json(_info(repo_id, repo))
    if api and kind == "tree" and revision in ("main", repo.commit):
        return _json(_tree(repo, file_path))
    if not api and kind == "resolve" and revision in ("main", repo.commit):
        return _file(repo, file_path, range_header)
    return _missing("EntryNotFound", f"[simulation] the fake Hub does not serve {path}")


def _json(data: object) -> HubAnswer:
    return HubAnswer(200, json.dumps(data).encode(), {"Content-Type": "application/json"})


def _missing(code: str, message: str, commit: str | None = None) -> HubAnswer:
    headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}
    if commit:
        headers["X-Repo-Commit"] = commit
    return HubAnswer(404, json.dumps({"error": message}).encode(), headers)


def _info(repo_id: str, repo: HubRepo) -> dict[str, object]:
    return {
        "_id": repo.commit[:24],
        "id": repo_id,
        "modelId": repo_id,
        "sha": repo.commit,
        "private": False,
        "gated": False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": ["guide-guard-rehearsal-simulation"],
        "lastModified": "2026-01-01T00:00:00.000Z",
        "siblings": [{"rfilename": name} for name in sorted(repo.files)],
    }


def _tree(repo: HubRepo, folder: str) -> list[dict[str, object]]:
    prefix = f"{folder.rstrip('/')}/" if folder else ""
    return [
        {"type": "file", "oid": repo.blob_ids[name], "size": len(data), "path": name}
        for name, data in sorted(repo.files.items())
        if name.startswith(prefix)
    ]


def _file(repo: HubRepo, file_path: str, range_header: str) -> HubAnswer:
    data = repo.files.get(file_path)
    if data is None:
        return _missing("EntryNotFound", f"no file {file_path}", repo.commit)
    headers = {
        "Content-Type": "application/octet-stream",
        "ETag": f'"{repo.blob_ids[file_path]}"',
        "X-Repo-Commit": repo.commit,
        "Accept-Ranges": "bytes",
    }
    wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header)
    if not wanted:
        return HubAnswer(200, data, headers)
    # a resumed download
    start, end = int(wanted.group(1)), int(wanted.group(2) or len(data) - 1)
    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
    return HubAnswer(206, data[start : end + 1], headers)


# -- the server ----------------------------------------------------------------------------------


class _HubHandler(BaseHTTPRequestHandler):
    server_version = "guide-guard-rehearsal-fake-hub"

    def __init__(self, *args: Any, hub: FakeHub, **kwargs: Any) -> None:
        self.hub = hub  # set first: the base class handles the request inside __init__
        super().__init__(*args, **kwargs)

    def log_message(self, format: str, *args: object) -> None:
        self.hub.log(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else '?'}")

    def do_HEAD(self) -> None:
        self._reply(send_body=False)

    def do_GET(self) -> None:
        self._reply(send_body=True)

    def _reply(self, send_body: bool) -> None:
        if send_body and self.hub.stalls_on and self.path.endswith(f"/{self.hub.stalls_on}"):
            # REHEARSAL_BREAK=net-stall: the connection is open and nothing is ever sent (until the Hub stops)
            self.hub.log(f"{self.command} {self.path} -> stalled (REHEARSAL_BREAK=net-stall): nothing sent")
            self.hub.stopping.wait(STALL_LIMIT_S)
            self.close_connection = True
            return
        reply = answer(self.hub.repos, self.path, self.headers.get("Range", ""))
        self.send_response(reply.status)
        self.send_header("X-Simulation", _SIMULATION_HEADER)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if send_body:
            self.wfile.write(reply.body)


class FakeHub:
    """The fake Hub on 127.0.0.1 and a free port, in a thread of this process.

    Every answer carries `X-Simulation`; every request is logged to log_path. With stalls_on (a file name, the
    net-stall knob) a GET of that file is accepted and answered with nothing at all.
    """

    def __init__(self, repos: Mapping[str, HubRepo], log_path: Path, *, stalls_on: str = "") -> None:
        self.repos = repos
        self.log_path = log_path
        self.stalls_on = stalls_on
        self.stopping = threading.Event()  # set when the Hub stops: a stalled reply ends then
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_HubHandler, hub=self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def log(self, line: str) -> None:
        """Count one request and append its line to the log."""
        with self._lock:
            self.requests += 1
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
