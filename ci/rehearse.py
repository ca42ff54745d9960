"""Rehearsal: run the SpecForge guide green on any Linux machine, against simulations of the NPU box it targets."""

# `python -m ci.rehearse docs/specforge.md [--output-dir DIR] [--keep] [--ref tag|commit] [ci.run flags]`
# moves into private network and mount namespaces where the machine allows it, builds a sandbox (fake
# tools first on PATH, a virtualenv holding the simulated image's Python packages, a local git repository
# standing in for SpecForge, the CANN files the guide reads), starts a fake Hugging Face Hub on 127.0.0.1
# for the real huggingface_hub client, runs `python -m ci.run` on the guide in that environment, and
# prints a report of every simulation and override in effect. Its exit status is ci.run's. The
# simulations live in ci/rehearsal/; docs/rehearsal.md describes them, the overrides and the failure knobs.

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

from ci.cli import command_parser

__all__ = ["KNOBS", "build_parser", "main"]

EXIT_SETUP = 2  # the rehearsal could not be prepared: nothing ran (as ci.run's usage errors)
ASSETS = Path(__file__).resolve().parent / "rehearsal"  # package data, in a checkout and a wheel alike
SANDBOX_ENV = "REHEARSAL_SANDBOX"  # every simulation finds the sandbox (and its call log) through it
BREAK_ENV = "REHEARSAL_BREAK"  # the failure knob the simulations obey

# REHEARSAL_BREAK values: which simulation misbehaves, and which block should then report it.
KNOBS = {
    "mooncake-no-bind": "mooncake_master never binds its RPC port: smoke-start-mooncake fails after its 30 s wait",
    "sglang-never-healthy": "SGLang answers /health with 503 for ever: smoke-start-sglang fails at its deadline",
    "trainer-dies": "specforge train fails at start: smoke-train-launch reports it died within the liveness wait",
    "trainer-zombie": "the trainer's process stays in state Z: smoke-train-monitor takes it as exited and passes",
    "trainer-no-step": "the trainer never logs a step/loss line: smoke-train-monitor fails at SPECFORGE_TRAIN_TIMEOUT",
    "trainer-hang": "the trainer hangs after its step line: smoke-train-monitor's teardown path dumps [ERROR] diagnostics",
}

UPSTREAM_URL = "https://github.com/sgl-project/SpecForge.git"  # what the guide clones
UPSTREAM_TAG = "v0.0.0-rehearsal"  # the release tag of the local stand-in repository
HUB_REPOS = {"Qwen/Qwen3.5-4B": ASSETS / "hub" / "Qwen" / "Qwen3.5-4B"}
EMBEDDING_TENSOR = "model.language_model.embed_tokens.weight"  # the guide's model.embedding_key
# The guide's default ports, all on 127.0.0.1: its expected output names 35551, and the recipe the
# trainer reads names 30000, so the rehearsal keeps the defaults rather than moving them.
GUIDE_PORTS = {30000: "SGLang capture server", 35551: "mooncake_master RPC", 35880: "mooncake HTTP metadata"}
# files the guide writes in /tmp, named in its blocks; not the globs of its ci.collect (`/tmp/smoke-*.log`),
# whose lookahead keeps a name from being cut short at a wildcard
_SCRATCH = re.compile(r"/tmp/[A-Za-z0-9._-]+(?![A-Za-z0-9._*?\[-])")
# Guide variables the rehearsal sets unless the caller already has: (value, why).
GUIDE_DEFAULTS = {"SPECFORGE_TRAIN_LIVENESS_WAIT": ("3", "the stand-in trainer needs about a second, not 30 s")}
FAKE_TOOLS = ("uv", "apt-get", "npu-smi", "pkill")
_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWUSER = 0x00020000, 0x40000000, 0x10000000  # <linux/sched.h>
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000  # <linux/mount.h>
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1  # <linux/sockios.h>, <net/if.h>
SHARED_ENV = "REHEARSAL_SHARED"  # set to 1: no private namespaces, the machine's loopback and /tmp
_FIXED_GIT_DATE = "2026-01-01T00:00:00+0000"  # the stand-in's commit hash is the same on every run
_SWEEP_GRACE_S = 5.0  # simulated processes end on their own once the harness has ended the servers


@dataclass(frozen=True)
class Sandbox:
    """Where one rehearsal keeps everything it builds; nothing outside it is written (but the guide's /tmp logs)."""

    root: Path  # --output-dir, or a temporary directory: ci.run's results.json and blocks/ go here too
    base: Path  # root/sandbox: the simulation's files

    @property
    def bin(self) -> Path:
        return self.base / "bin"  # fake tools and the `python` shim, first on PATH

    @property
    def venv(self) -> Path:
        return self.base / "venv"  # where `uv pip install` puts packages (mooncake, specforge, accelerate)

    @property
    def workdir(self) -> Path:
        return self.base / "work"  # every block's working directory (the SpecForge clone lands here)

    @property
    def ascend_root(self) -> Path:
        return self.base / "ascend"  # stands in for /usr/local/Ascend

    @property
    def bare_repo(self) -> Path:
        return self.base / "git" / "SpecForge.git"

    @property
    def calls(self) -> Path:
        return self.base / "calls.jsonl"  # every fake tool and simulated program records its argv here

    @property
    def processes(self) -> Path:
        return self.base / "processes.txt"  # long-lived simulated processes: pid, start time, name


@dataclass(frozen=True)
class Simulation:
    """One thing the guide touches that the rehearsal replaces, for the report."""

    name: str
    stands_in_for: str
    how: str


@dataclass(frozen=True)
class Override:
    """A setting that differs from the machine the guide was written for, for the report."""

    name: str
    value: str
    why: str


@dataclass
class Rehearsal:
    """What was prepared: the sandbox, the environment for ci.run, and what the report lists."""

    sandbox: Sandbox
    env: dict[str, str]
    simulations: list[Simulation] = field(default_factory=list)
    overrides: list[Override] = field(default_factory=list)

    def override(self, name: str, value: str, why: str) -> None:
        self.env[name] = value
        self.overrides.append(Override(name, value, why))


class SetupError(Exception):
    """The rehearsal cannot be prepared on this machine (a port is taken, git is missing, ...)."""


# -- the fake Hugging Face Hub --------------------------------------------------------------------


@dataclass(frozen=True)
class HubRepo:
    """A model repository as the fake Hub serves it: files, their git blob ids, one commit."""

    files: Mapping[str, bytes]
    blob_ids: Mapping[str, str]
    commit: str


def hub_repo(files: Mapping[str, bytes]) -> HubRepo:
    blob_ids = {path: hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() for path, data in files.items()}
    listing = "".join(f"{path} {blob_ids[path]}\n" for path in sorted(files))
    return HubRepo(files, blob_ids, hashlib.sha1(listing.encode()).hexdigest())


class FakeHub:
    """The Hub endpoints huggingface_hub's snapshot_download uses, on 127.0.0.1 and a free port.

    Model info (`/api/models/{repo}/revision/{rev}`), the file tree
    (`/api/models/{repo}/tree/{rev}`), and HEAD/GET `/{repo}/resolve/{rev}/{file}`
    with the headers the client checks (X-Repo-Commit, ETag, Content-Length).
    Every answer carries `X-Simulation`; every request is logged.
    """

    def __init__(self, repos: Mapping[str, HubRepo], log_path: Path) -> None:
        self.repos = repos
        self.log_path = log_path
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _log(self, line: str) -> None:
        with self._lock:
            self.requests += 1
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "guide-guard-rehearsal-fake-hub"

            def log_message(self, format: str, *args: object) -> None:
                hub._log(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else '?'}")

            def do_HEAD(self) -> None:
                self._route(send_body=False)

            def do_GET(self) -> None:
                self._route(send_body=True)

            def _send(self, status: int, body: bytes, headers: Mapping[str, str], send_body: bool) -> None:
                self.send_response(status)
                self.send_header("X-Simulation", "guide-guard rehearsal: fake Hugging Face Hub on loopback")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

            def _json(self, data: object, send_body: bool) -> None:
                body = json.dumps(data).encode()
                self._send(200, body, {"Content-Type": "application/json"}, send_body)

            def _missing(self, code: str, message: str, send_body: bool, commit: str | None = None) -> None:
                headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}
                if commit:
                    headers["X-Repo-Commit"] = commit
                self._send(404, json.dumps({"error": message}).encode(), headers, send_body)

            def _route(self, send_body: bool) -> None:
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                api = path.startswith("/api/models/")
                rest = path.removeprefix("/api/models/") if api else path.removeprefix("/")
                repo_id = next((r for r in hub.repos if rest == r or rest.startswith(r + "/")), None)
                if repo_id is None:
                    self._missing("RepoNotFound", f"[simulation] the fake Hub has no repository at {path}", send_body)
                    return
                repo = hub.repos[repo_id]
                tail = rest[len(repo_id) :].lstrip("/")
                kind, _, tail = tail.partition("/")
                revision, _, file_path = tail.partition("/")
                if api and kind in ("", "revision"):
                    if kind and revision not in ("main", repo.commit):
                        self._missing("RevisionNotFound", f"no revision {revision}", send_body)
                        return
                    self._json(self._info(repo_id, repo), send_body)
                elif api and kind == "tree" and revision in ("main", repo.commit):
                    prefix = f"{file_path.rstrip('/')}/" if file_path else ""
                    entries = [
                        {"type": "file", "oid": repo.blob_ids[name], "size": len(data), "path": name}
                        for name, data in sorted(repo.files.items())
                        if name.startswith(prefix)
                    ]
                    self._json(entries, send_body)
                elif not api and kind == "resolve" and revision in ("main", repo.commit):
                    self._file(repo, file_path, send_body)
                else:
                    self._missing("EntryNotFound", f"[simulation] the fake Hub does not serve {path}", send_body)

            def _info(self, repo_id: str, repo: HubRepo) -> dict[str, object]:
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

            def _file(self, repo: HubRepo, file_path: str, send_body: bool) -> None:
                data = repo.files.get(file_path)
                if data is None:
                    self._missing("EntryNotFound", f"no file {file_path}", send_body, repo.commit)
                    return
                headers = {
                    "Content-Type": "application/octet-stream",
                    "ETag": f'"{repo.blob_ids[file_path]}"',
                    "X-Repo-Commit": repo.commit,
                    "Accept-Ranges": "bytes",
                }
                status = 200
                wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if wanted:  # a resumed download
                    start, end = int(wanted.group(1)), int(wanted.group(2) or len(data) - 1)
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    data, status = data[start : end + 1], 206
                self._send(status, data, headers, send_body)

        return Handler


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
    repos = {}
    for repo_id, directory in HUB_REPOS.items():
        files = {path.relative_to(directory).as_posix(): path.read_bytes() for path in directory.rglob("*")}
        files["model.safetensors"] = tiny_safetensors()
        repos[repo_id] = hub_repo({name: data for name, data in files.items() if "__pycache__" not in name})
    return repos


# -- preparing the sandbox -------------------------------------------------------------------------


def _run(argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SetupError(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout


def isolate() -> str | None:
    """Move this process, before it starts any thread, into network and mount namespaces of its own.

    The network's only interface is a loopback: nothing the guide runs can
    reach the network, and the guide's fixed ports cannot clash with another
    rehearsal or a real server. The mount namespace lets the guide's /tmp
    files be the sandbox's (redirect_scratch). Root gets both directly; others
    through a user namespace that maps only their own uid. Returns why not when
    the machine does not allow it (a container without the capability, user
    namespaces disabled or confined): the rehearsal then shares the machine's
    loopback and /tmp. A forked child tries every step first, since a process
    cannot return to the namespaces it left.
    """
    if os.environ.get(SHARED_ENV) == "1":
        return f"{SHARED_ENV}=1"
    probe_files = [tempfile.mkstemp(prefix="guide-guard-rehearsal-probe-") for _ in range(2)]
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the probe: report the first failure; its mounts vanish with it
        os.close(read_end)
        try:
            _enter_namespaces()
            _bind(probe_files[0][1], probe_files[1][1])
            reason = b""
        except Exception as exc:  # any failure means: not here
            reason = str(exc).encode() or type(exc).__name__.encode()
        os.write(write_end, reason)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        reason_text = answer.read().decode("utf-8", "replace")
    os.waitpid(child, 0)
    for descriptor, path in probe_files:
        os.close(descriptor)
        os.unlink(path)
    if reason_text:
        return f"no private namespaces here: {reason_text}"
    _enter_namespaces()
    return None


def _enter_namespaces() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS) != 0:
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
    # mounts made from now on stay in this namespace
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), f"making / private: {os.strerror(ctypes.get_errno())}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(control, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(control, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))


def _bind(source: str, target: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), None, _MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), f"cannot bind {source} over {target}: {os.strerror(ctypes.get_errno())}")


def scratch_files(guide_text: str) -> list[str]:
    """The /tmp files the guide's blocks name (logs, pid files)."""
    return sorted(set(_SCRATCH.findall(guide_text)))


def redirect_scratch(paths: Sequence[str], directory: Path) -> None:
    """Bind the sandbox's own copy over each of the guide's /tmp files, in this mount namespace only.

    A bind mount needs an existing file to cover, so an empty one is created
    on the machine where none exists yet; what the guide writes stays in the
    sandbox, and concurrent rehearsals do not read each other's logs.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for path in paths:
        own = directory / os.path.basename(path)
        own.touch()
        if not os.path.lexists(path):
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        try:
            _bind(str(own), path)
        except OSError as exc:
            raise SetupError(str(exc)) from exc


def check_machine() -> None:
    """What the rehearsal itself needs: Linux, bash, git, and the guide's ports free on 127.0.0.1."""
    for program in ("bash", "git"):
        if shutil.which(program) is None:
            raise SetupError(f"the rehearsal needs {program} on PATH")
    for port, user in GUIDE_PORTS.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                raise SetupError(
                    f"port {port} on 127.0.0.1 is in use ({exc.strerror}); the rehearsal's {user} needs it, "
                    "since the guide's expected output and recipe name the default ports"
                ) from exc


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)


def _harness_site_dirs() -> list[str]:
    """The harness's own package directories: huggingface_hub, click, PyYAML, pip come from here."""
    return [
        entry
        for entry in sys.path
        if os.path.basename(entry.rstrip("/")) in ("site-packages", "dist-packages") and os.path.isdir(entry)
    ]


def make_python(sandbox: Sandbox) -> Path:
    """A virtualenv for `uv pip install`, seeing the simulated image's packages and the harness's own."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(sandbox.venv)])
    python = sandbox.venv / "bin" / "python"
    site_packages = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    lines = [str(sandbox.base / "image"), str(sandbox.base / "sgl-workspace" / "sglang" / "python")]
    # `import` lines in a .pth run at start-up: addsitedir also reads the harness's own .pth files
    lines += [f"import site; site.addsitedir({entry!r})" for entry in _harness_site_dirs()]
    (site_packages / "zz-rehearsal-image.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    version = platform.python_version()
    if version.startswith("3.11."):
        version_answer = ""
    else:  # the image has Python 3.11; say so, and which Python really runs
        version_answer = (
            'if [ "$#" -eq 1 ] && { [ "$1" = "--version" ] || [ "$1" = "-V" ]; }; then\n'
            f'    echo "Python 3.11.x [simulation: the image\'s Python 3.11; the rehearsal runs Python {version}]"\n'
            "    exit 0\n"
            "fi\n"
        )
    for name in ("python", "python3"):
        shim = sandbox.bin / name
        shim.write_text(
            "#!/bin/sh\n"
            f"# [simulation] guide-guard rehearsal: `{name}` is the sandbox's interpreter (Python {version}),\n"
            "# which sees the simulated image's packages (torch, torch_npu, sglang) and what uv installed.\n"
            f'{version_answer}exec {python} "$@"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
    return python


def install_fake_tools(sandbox: Sandbox, python: Path) -> list[str]:
    """The multi-call fake tools under their names; curl only where the machine has none."""
    program = sandbox.bin / ".rehearsal-tools"
    source = (ASSETS / "fakes" / "tools.py").read_text(encoding="utf-8")
    program.write_text(f"#!{python}\n" + source.split("\n", 1)[1], encoding="utf-8")
    program.chmod(0o755)
    names = list(FAKE_TOOLS)
    if shutil.which("curl") is None:
        names.append("curl")
    for name in names:
        (sandbox.bin / name).symlink_to(program.name)
    return names


def make_image(sandbox: Sandbox) -> None:
    """The packages the 910B image ships, CANN's files, and the patch index for `uv pip install`."""
    _copy_tree(ASSETS / "image", sandbox.base / "image")
    workspace = sandbox.base / "sgl-workspace" / "sglang"  # the image installs sglang editable from a git checkout
    _copy_tree(ASSETS / "sglang", workspace)
    _run(["git", "init", "-q", str(workspace)], env=_git_env())
    for project in sorted((ASSETS / "packages").iterdir()):
        target = sandbox.base / "index" / project.name
        _copy_tree(project, target)
        shutil.copy(ASSETS / "build_backend.py", target / "rehearsal_build_backend.py")
    toolkit = sandbox.ascend_root / "ascend-toolkit" / "latest" / f"{platform.machine()}-linux"
    toolkit.mkdir(parents=True)
    (toolkit / "ascend_toolkit_install.info").write_text(
        "# [simulation] guide-guard rehearsal stand-in for CANN's install info\n"
        f"package_name=Ascend-cann-toolkit\nversion=9.0.0\narch={platform.machine()}\nos=linux\n",
        encoding="utf-8",
    )
    atb = sandbox.ascend_root / "nnal" / "atb" / "9.0.0" / "atb" / "cxx_abi_1" / "lib"
    atb.mkdir(parents=True)
    (atb / "libatb.so").write_text("[simulation] not a library: marks the ATB lib dir\n", encoding="utf-8")


def _git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    env.update(extra or {})
    return env


def make_upstream(sandbox: Sandbox) -> tuple[str, Path]:
    """The local SpecForge repository (bare, tagged) and the git config that points the guide's URL at it."""
    source = sandbox.base / "git" / "specforge-src"
    _copy_tree(ASSETS / "specforge-repo", source)
    shutil.copy(ASSETS / "build_backend.py", source / "rehearsal_build_backend.py")
    who = {
        "GIT_AUTHOR_NAME": "guide-guard rehearsal",
        "GIT_AUTHOR_EMAIL": "rehearsal@guide-guard.invalid",
        "GIT_AUTHOR_DATE": _FIXED_GIT_DATE,
        "GIT_COMMITTER_NAME": "guide-guard rehearsal",
        "GIT_COMMITTER_EMAIL": "rehearsal@guide-guard.invalid",
        "GIT_COMMITTER_DATE": _FIXED_GIT_DATE,
    }
    env = _git_env(who)
    _run(["git", "init", "-q", "-b", "main", str(source)], env=env)
    _run(["git", "-C", str(source), "add", "-A"], env=env)
    _run(["git", "-C", str(source), "commit", "-q", "-m", "[simulation] SpecForge stand-in"], env=env)
    _run(["git", "-C", str(source), "tag", UPSTREAM_TAG], env=env)
    _run(["git", "clone", "-q", "--bare", str(source), str(sandbox.bare_repo)], env=env)
    # the guide's commit path fetches one commit by hash
    _run(["git", "-C", str(sandbox.bare_repo), "config", "uploadpack.allowAnySHA1InWant", "true"], env=env)
    commit = _run(["git", "-C", str(source), "rev-parse", "HEAD"], env=env).strip()
    gitconfig = sandbox.base / "gitconfig"
    gitconfig.write_text(
        "# [simulation] guide-guard rehearsal: the guide's SpecForge URL is this local repository.\n"
        f'[url "{sandbox.bare_repo.as_uri()}"]\n\tinsteadOf = {UPSTREAM_URL}\n',
        encoding="utf-8",
    )
    return commit, gitconfig


def prepare(root: Path, *, ref_kind: str) -> Rehearsal:
    """Build the sandbox under root and the environment ci.run gets; nothing is started yet."""
    sandbox = Sandbox(root=root, base=root / "sandbox")
    for directory in (sandbox.bin, sandbox.workdir, sandbox.base / "home", sandbox.base / "tmp"):
        directory.mkdir(parents=True, exist_ok=True)
    (sandbox.base / ".guide-guard-rehearsal").write_text("a rehearsal sandbox; safe to delete\n", encoding="utf-8")
    python = make_python(sandbox)
    tools = install_fake_tools(sandbox, python)
    make_image(sandbox)
    commit, gitconfig = make_upstream(sandbox)

    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "UPSTREAM_REF", BREAK_ENV)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in dropped and not name.startswith(("HF_", "HUGGING_FACE_", "GIT_", "PIP_", "UV_"))
    }
    plan = Rehearsal(sandbox=sandbox, env=env)
    plan.override(
        "PATH", f"{sandbox.bin}:{sandbox.venv / 'bin'}:{os.environ.get('PATH', os.defpath)}", "fake tools first"
    )
    plan.override("VIRTUAL_ENV", str(sandbox.venv), "`uv pip install` installs into the sandbox's virtualenv")
    plan.override("HOME", str(sandbox.base / "home"), "no tool writes to the real home directory")
    plan.override("TMPDIR", str(sandbox.base / "tmp"), "temporary files of pip and Python stay in the sandbox")
    plan.override("PYTHONDONTWRITEBYTECODE", "1", "no bytecode written anywhere; existing caches are still read")
    plan.override(SANDBOX_ENV, str(sandbox.base), "simulations record their calls here")
    plan.override("REHEARSAL_INDEX", str(sandbox.base / "index"), "the fake uv's simulated package index")
    py_spy = Path(sys.executable).parent / "py-spy"
    plan.env["REHEARSAL_PY_SPY"] = str(py_spy) if py_spy.exists() else shutil.which("py-spy") or ""
    plan.override("GIT_CONFIG_GLOBAL", str(gitconfig), f"url.insteadOf sends {UPSTREAM_URL} to the local repository")
    plan.override("GIT_CONFIG_NOSYSTEM", "1", "the machine's git config cannot redirect the clone elsewhere")
    upstream_ref = commit if ref_kind == "commit" else UPSTREAM_TAG
    why = "the stand-in's release tag" if ref_kind == "tag" else f"the commit of the stand-in's {UPSTREAM_TAG}"
    plan.override("UPSTREAM_REF", upstream_ref, why)
    plan.override("HF_HOME", str(sandbox.base / "hf-home"), "the model cache lives in the sandbox")
    plan.override("HF_HUB_DISABLE_TELEMETRY", "1", "nothing leaves the machine")
    no_proxy = ",".join(filter(None, ["127.0.0.1", "localhost", os.environ.get("NO_PROXY", "")]))
    plan.override("NO_PROXY", no_proxy, "loopback traffic never goes through a proxy")
    plan.env["no_proxy"] = no_proxy
    plan.override(
        "SPECFORGE_ASCEND_ROOT",
        str(sandbox.ascend_root),
        "for /usr/local/Ascend: check-cann's install info, smoke-start-sglang's ATB lib dir",
    )
    for name, (value, why) in GUIDE_DEFAULTS.items():
        if name not in env:
            plan.override(name, value, why)
    for name in sorted(os.environ):
        if name.startswith("SPECFORGE_") and name not in plan.env.keys() - os.environ.keys():
            plan.overrides.append(Override(name, os.environ[name], "from the caller's environment"))
    knob = os.environ.get(BREAK_ENV, "")
    if knob:
        plan.override(BREAK_ENV, knob, KNOBS[knob])

    plan.simulations += [
        Simulation("npu-smi, apt-get", "the driver's CLI, the system package manager", "fake tools that record calls"),
        Simulation(
            "uv", "uv pip install", "fake: builds each wheel with its own PEP 517 backend, offline, into the venv"
        ),
        Simulation("pkill", "pkill", "fake: signals only processes carrying this rehearsal's sandbox marker"),
        Simulation("python", "the image's Python 3.11", f"sandbox venv on Python {platform.python_version()}"),
        Simulation("torch 2.10.0+cpu, torch_npu 2.10.0", "the image's PyTorch", "packages: 4 simulated 910B4 NPUs"),
        Simulation("sglang 0.5.18", "the image's editable sglang", "package; launch_server serves /health on loopback"),
        Simulation(
            "mooncake-transfer-engine-npu 0.3.13.post1",
            "Mooncake's NPU wheel",
            "stand-in installed by uv; mooncake_master listens on its RPC port",
        ),
        Simulation("accelerate", "accelerate from PyPI", "stand-in installed by uv (set_seed only)"),
        Simulation(
            "SpecForge", UPSTREAM_URL, f"local repository {sandbox.bare_repo} via git's url.insteadOf, no fake git"
        ),
        Simulation(
            "Qwen/Qwen3.5-4B",
            "the Hugging Face Hub",
            "fake Hub on 127.0.0.1 for the real huggingface_hub client; a few-byte model",
        ),
        Simulation("CANN 9.0.0, ATB", "/usr/local/Ascend", f"files under {sandbox.ascend_root}"),
    ]
    if "curl" in tools:
        plan.simulations.append(Simulation("curl", "curl", "fake: this machine has no curl"))
    return plan


# -- after the run ----------------------------------------------------------------------------------


def _start_ticks(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _has_live_thread(pid: int) -> bool:
    """A zombie thread group leader whose other threads still run counts as alive."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="utf-8") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    return True
        except (OSError, IndexError):
            continue
    return False


def _survivors(sandbox: Sandbox) -> dict[int, str]:
    """Simulated processes still running: the registered ones and any carrying the sandbox marker."""
    found: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for line in sandbox.processes.read_text(encoding="utf-8").splitlines():
            pid_text, ticks, name = line.split(" ", 2)
            pid = int(pid_text)
            if _start_ticks(pid) == ticks and _has_live_thread(pid):
                found[pid] = name
    marker = f"{SANDBOX_ENV}={sandbox.base}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry}/environ", "rb") as handle:
            if marker in handle.read().split(b"\0") and _has_live_thread(int(entry)):
                with open(f"/proc/{entry}/cmdline", "rb") as command:
                    found[int(entry)] = command.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
    return found


def sweep(sandbox: Sandbox) -> dict[int, str]:
    """End whatever simulated process outlived the run (after a short grace); return what had to be ended."""
    deadline = time.monotonic() + _SWEEP_GRACE_S
    left = _survivors(sandbox)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _survivors(sandbox)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def _call_counts(sandbox: Sandbox) -> Counter[str]:
    counts: Counter[str] = Counter()
    with contextlib.suppress(OSError):
        for line in sandbox.calls.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, KeyError):
                counts[json.loads(line)["tool"]] += 1
    return counts


def report(
    plan: Rehearsal,
    guide: str,
    hub: FakeHub,
    exit_status: int,
    leftovers: Mapping[int, str],
    shared: str | None,
    scratch: Sequence[str],
) -> str:
    lines = [f"=== rehearsal of {guide}: simulations, no NPU, no network (everything on 127.0.0.1)"]
    if shared is None:
        lines.append("isolation: private network namespace (loopback only) and mount namespace")
    else:
        lines.append(f"isolation: none ({shared}); the machine's loopback and /tmp are shared")
    lines.append("simulations:")
    lines += [f"  {s.name}: {s.how} (for {s.stands_in_for})" for s in plan.simulations]
    lines.append(f"  fake Hugging Face Hub: {hub.url} ({hub.requests} requests, log {plan.sandbox.base / 'hub.log'})")
    lines.append("overrides:")
    lines += [f"  {o.name}={o.value}  ({o.why})" for o in plan.overrides]
    lines.append(f"  --workdir {plan.sandbox.workdir}  (the SpecForge clone and every block's cwd)")
    lines.append(f"  ports kept at the guide's defaults on 127.0.0.1: {', '.join(map(str, GUIDE_PORTS))}")
    if shared is None:
        lines.append(
            f"  {', '.join(scratch)}: bind mounts of {plan.sandbox.base / 'guide-tmp'}/ (empty on the machine)"
        )
    else:
        lines.append(f"  not redirected: the guide's own {', '.join(scratch)}")
    counts = _call_counts(plan.sandbox)
    calls = ", ".join(f"{tool} x{n}" for tool, n in sorted(counts.items())) or "none"
    lines.append(f"calls recorded by the simulations: {calls} ({plan.sandbox.calls})")
    for pid, name in leftovers.items():
        lines.append(f"[ERROR] rehearsal: simulated process {pid} ({name}) outlived the run; killed")
    verdict = "PASSED" if exit_status == 0 else "FAILED"
    lines.append(f"=== rehearsal: {verdict} (ci.run exit {exit_status})")
    return "\n".join(lines)


# -- command line -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "ci.rehearse",
        description="Run a guide against simulations of its NPU machine (no NPU, no network); "
        "other flags go to ci.run.",
        epilog=f"Failure knobs ({BREAK_ENV}=...): " + "; ".join(f"{k}: {v}" for k, v in KNOBS.items()),
    )
    parser.add_argument("guide", metavar="GUIDE", help="the guide to rehearse (docs/specforge.md)")
    parser.add_argument("--output-dir", metavar="DIR", help="sandbox, block outputs and results.json (kept)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory after a passing run")
    parser.add_argument(
        "--ref",
        choices=("tag", "commit"),
        default="tag",
        help="give UPSTREAM_REF as the stand-in's release tag (default) or its commit hash",
    )
    return parser


def _end_with_parent() -> None:
    """In ci.run's process: SIGTERM if the rehearsal dies, so it ends its blocks even after a SIGKILL of ours."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class _Forwarder:
    """Passes SIGINT/SIGTERM on to ci.run, which ends its blocks and writes its reports."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(OSError):
                self.child.send_signal(signum)


@contextlib.contextmanager
def _forwarding_signals() -> Iterator[_Forwarder]:
    forwarder = _Forwarder()
    previous = {signum: signal.signal(signum, forwarder) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield forwarder
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, passed_on = parser.parse_known_args(argv)
    if any(arg == "--workdir" or arg.startswith("--workdir=") for arg in passed_on):
        parser.error("--workdir is the rehearsal's: every block runs in the sandbox")
    knob = os.environ.get(BREAK_ENV, "")
    if knob and knob not in KNOBS:
        parser.error(f"{BREAK_ENV}={knob!r} is not a failure knob; known: {', '.join(KNOBS)}")
    if not Path(args.guide).is_file():
        parser.error(f"no guide at {args.guide}")

    if not sys.platform.startswith("linux"):
        print("[ERROR] rehearsal: it runs on Linux only (it reads /proc, as the guide does)", file=sys.stderr)
        return EXIT_SETUP

    temporary = args.output_dir is None
    root: Path | None = None
    scratch = scratch_files(Path(args.guide).read_text(encoding="utf-8"))
    try:
        shared = isolate()
        check_machine()
        root = (
            Path(tempfile.mkdtemp(prefix="guide-guard-rehearsal-")) if temporary else Path(args.output_dir).absolute()
        )
        base = root / "sandbox"
        if base.exists():
            if not (base / ".guide-guard-rehearsal").exists():
                raise SetupError(f"{base} exists and is not a rehearsal sandbox")
            shutil.rmtree(base)
        plan = prepare(root, ref_kind=args.ref)
        if shared is None:
            redirect_scratch(scratch, plan.sandbox.base / "guide-tmp")
    except SetupError as exc:
        print(f"[ERROR] rehearsal: {exc}", file=sys.stderr)
        if temporary and root is not None:
            shutil.rmtree(root, ignore_errors=True)
        return EXIT_SETUP

    hub = FakeHub(hub_repositories(), plan.sandbox.base / "hub.log")
    plan.override("HF_ENDPOINT", hub.url, "the fake Hub serves the model")
    command = [sys.executable, "-m", "ci.run", args.guide, "--output-dir", str(root)]
    command += ["--workdir", str(plan.sandbox.workdir), *passed_on]
    print(f"rehearsal: {args.guide} against simulations; sandbox {plan.sandbox.base}", flush=True)
    exit_status = EXIT_SETUP
    leftovers: dict[int, str] = {}
    try:
        with _forwarding_signals() as forwarder:
            # started before the Hub's thread: preexec_fn is safe while this process has one thread
            forwarder.child = subprocess.Popen(
                command, env=plan.env, stdin=subprocess.DEVNULL, preexec_fn=_end_with_parent
            )
            hub.start()  # long before the guide's download block
            exit_status = forwarder.child.wait()
    finally:
        hub.stop()
        leftovers = sweep(plan.sandbox)
    if leftovers and exit_status == 0:
        exit_status = 1
    text = report(plan, args.guide, hub, exit_status, leftovers, shared, scratch)
    (plan.sandbox.base / "rehearsal-report.txt").write_text(text + "\n", encoding="utf-8")
    print(text, flush=True)
    if temporary and not args.keep and exit_status == 0:
        shutil.rmtree(root, ignore_errors=True)
        print(f"rehearsal: removed {root} (--keep keeps it)")
    else:
        print(f"rehearsal: outputs and sandbox kept in {root}")
    return exit_status


if __name__ == "__main__":
    sys.exit(main())
