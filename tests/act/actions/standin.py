"""Stand-ins for the third-party actions the workflows pin, for the Actions engine scenarios (tests/act).

Each is a simulation and says so in its first line of output. Artifacts and caches live under one local
directory, ACT_STANDIN_STORE, which the scenario gives act with `--env`: `artifacts/RUN_ID/NAME/...` for
upload-artifact and download-artifact, `caches/KEY.tar` for cache/restore and cache/save. What each copies
of the real action (inputs, outputs, failure modes) is said at its function; what is invented is said
there too. Inputs arrive as INPUT_* variables, which the composite action.yml beside sets from `inputs`.
"""

from __future__ import annotations

import fcntl
import fnmatch
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["main"]


def say(name: str, text: str) -> None:
    print(f"[simulation] {name} stand-in (tests/act/actions): {text}", flush=True)


def given(name: str, default: str = "") -> str:
    return os.environ.get(f"INPUT_{name.upper().replace('-', '_')}", default).strip()


def store() -> Path:
    root = os.environ.get("ACT_STANDIN_STORE")
    if not root:
        sys.exit("ACT_STANDIN_STORE is not set: the scenario gives act `--env ACT_STANDIN_STORE=DIR`")
    return Path(root)


def artifacts() -> Path:
    """This workflow run's artifacts: as on GitHub, a name is unique within a run, and only there."""
    return store() / "artifacts" / os.environ["GITHUB_RUN_ID"]


def write_output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as outputs:
        outputs.write(f"{name}={value}\n")


def workspace_path(text: str) -> Path:
    path = Path(os.path.expandvars(os.path.expanduser(text)))
    return path if path.is_absolute() else Path(os.environ["GITHUB_WORKSPACE"]) / path


def checkout() -> int:
    """Clones the scenario's repository (ACT_STANDIN_REPOSITORY) at GITHUB_SHA into the workspace, as the real
    action fetches it: `fetch-depth` commits (1 by default, 0 for the whole history).

    A workspace that is that repository already (a container job's, bound at its host path) is left as it is.
    `path` clones into that folder of the workspace instead. `repository` names another repository, one of
    the scenario's (ACT_STANDIN_REPOSITORIES, `OWNER/NAME=DIR` separated by `;`, as act's --local-repository
    names them), cloned at `ref` (else its HEAD: GITHUB_SHA is the caller's commit); an empty one, or
    github.repository's name, is the scenario's own, as the real action takes github.repository.
    """
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    target = workspace / given("path") if given("path") else workspace
    known = dict(entry.split("=", 1) for entry in os.environ.get("ACT_STANDIN_REPOSITORIES", "").split(";") if entry)
    repository = given("repository")
    if repository == os.environ.get("GITHUB_REPOSITORY") and repository not in known:
        repository = ""  # the scenario's own, named as github.repository names it
    if repository:
        if repository not in known:
            sys.exit(f"the checkout stand-in knows no repository {repository!r}; the scenario names {sorted(known)}")
        source, commit = Path(known[repository]), given("ref") or "HEAD"
    else:
        source, commit = Path(os.environ["ACT_STANDIN_REPOSITORY"]), given("ref") or os.environ["GITHUB_SHA"]
    if target == workspace and workspace.resolve() == source.resolve():
        say("actions/checkout", f"the workspace is the repository itself ({source}): nothing to fetch")
        return 0
    if target != workspace:
        shutil.rmtree(target, ignore_errors=True)
    depth = given("fetch-depth") or "1"
    # a commit named by `ref` is fetched whole: a shallow clone of the default branch may not hold it
    shallow = depth != "0" and not given("ref")
    command = ["git", "clone", "--quiet", "--no-checkout"] + (["--depth", depth] if shallow else [])
    subprocess.run([*command, source.resolve().as_uri(), str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "--quiet", "--detach", commit], check=True)
    say("actions/checkout", f"cloned {source} at {commit} into {target} (fetch-depth {depth})")
    return 0


def setup_python() -> int:
    """Puts a Python of the asked version first on PATH (GITHUB_PATH), as the real action does.

    The real action takes it from the runner's tool cache, which a self-hosted runner keeps between jobs.
    Here the interpreter is pyenv's X.Y (its versions folder is this machine's tool cache), else a
    `pythonX.Y` on PATH that really is X.Y; the job gets a virtual environment of it (so that its bin
    directory holds nothing else), made once per scenario in the store's `toolcache/` and copied for each
    job (a job's `pip install` stays its own). Where no X.Y exists, the host's `python3` stands in and
    that is said (invented: the real action fails).
    """
    version = given("python-version") or "3"
    found = find_python(version)
    if found is None:
        say("actions/setup-python", f"no Python {version} here: the host's python3 stands in for it")
        found = shutil.which("python3") or sys.executable
    cached = store() / "toolcache" / f"python-{version}"
    with open(store() / "toolcache.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cached / "bin" / "python").exists():
            subprocess.run([found, "-m", "venv", "--symlinks", str(cached)], check=True)
    target = Path(os.environ["RUNNER_TEMP"]) / f"setup-python-{version}"
    shutil.copytree(cached, target, symlinks=True, dirs_exist_ok=True)
    actual = run_version(str(target / "bin" / "python"))
    say("actions/setup-python", f"python-version {version}: Python {actual} ({found}) in a venv at {target}")
    with open(os.environ["GITHUB_PATH"], "a", encoding="utf-8") as path_file:
        path_file.write(f"{target / 'bin'}\n")
    write_output("python-path", str(target / "bin" / "python"))
    write_output("python-version", actual)
    return 0


def find_python(version: str) -> str | None:
    """An interpreter of `version` (X or X.Y): pyenv's newest such version, else one on PATH."""
    pyenv_versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    installed = sorted(pyenv_versions.glob(f"{version}.*/bin/python{version}"), key=lambda p: p.parts[-3])
    candidates = [str(path) for path in installed[-1:]] + [shutil.which(f"python{version}") or ""]
    for candidate in filter(None, candidates):
        try:
            actual = run_version(candidate)
        except (OSError, subprocess.CalledProcessError):
            continue  # a pyenv shim of a version pyenv does not enable
        if actual == version or actual.startswith(f"{version}."):
            return candidate
    return None


def run_version(python: str) -> str:
    """`X.Y.Z` of an interpreter, as the real action's `python-version` output gives it."""
    command = [python, "-c", "import platform; print(platform.python_version())"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def upload_artifact() -> int:
    """Copies `path` to the store under `name`; `if-no-files-found` and `overwrite` as the real v4+ action.

    The real action refuses a name already uploaded in the run unless `overwrite: true` (HTTP 409).
    """
    name = given("name") or "artifact"
    sources = [workspace_path(line) for line in given("path").splitlines() if line.strip()]
    target = artifacts() / name
    files = [source for source in sources if source.exists()]
    if not files:
        mode = given("if-no-files-found") or "warn"
        message = f"No files were found with the provided path: {given('path')}. No artifacts will be uploaded."
        say("actions/upload-artifact", message)
        if mode == "error":
            print(f"::error::{message}")
            return 1
        if mode == "warn":
            print(f"::warning::{message}")
        return 0
    if target.exists():
        if given("overwrite") != "true":
            print(f"::error::Failed to CreateArtifact: an artifact with this name already exists: {name}")
            return 1
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for source in files:
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
        else:
            shutil.copy2(source, target / source.name)
    say("actions/upload-artifact", f"uploaded {name} ({', '.join(map(str, files))})")
    write_output("artifact-id", name)
    return 0


def download_artifact() -> int:
    """Copies the artifacts whose names match `pattern` (or `name`) to `path`, merged with `merge-multiple`."""
    pattern = given("pattern") or given("name") or "*"
    destination = workspace_path(given("path") or ".")
    root = artifacts()
    names = sorted(entry.name for entry in root.iterdir()) if root.is_dir() else []
    matched = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
    say("actions/download-artifact", f"pattern {pattern}: {', '.join(matched) or 'no artifact'}")
    if not matched and given("name"):
        print(f"::error::Artifact not found for name: {given('name')}")
        return 1
    merge = given("merge-multiple") == "true" or bool(given("name"))
    for name in matched:
        shutil.copytree(root / name, destination if merge else destination / name, dirs_exist_ok=True)
    return 0


def cache_restore() -> int:
    """The exact `key`, else the newest cache whose key starts with a `restore-keys` line, as the real one.

    Outputs `cache-hit` (true only for the exact key), `cache-primary-key` and `cache-matched-key`;
    `fail-on-cache-miss` fails the step when nothing matched.
    """
    key = given("key")
    caches = store() / "caches"
    candidates = sorted(caches.glob("*.tar"), key=lambda file: file.stat().st_mtime_ns, reverse=True)
    keys = [file.name.removesuffix(".tar") for file in candidates]
    matched = key if key in keys else None
    for prefix in [line.strip() for line in given("restore-keys").splitlines() if line.strip()]:
        if matched is None:
            matched = next((found for found in keys if found.startswith(prefix)), None)
    write_output("cache-primary-key", key)
    if matched is None:
        say("actions/cache/restore", f"no cache for key {key}")
        if given("fail-on-cache-miss") == "true":
            print(f"::error::Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: {key}")
            return 1
        return 0
    with tarfile.open(caches / f"{matched}.tar") as archive:
        # the "data" filter where this Python has it (3.12, and 3.11.4 and 3.10.12 on)
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(os.environ["GITHUB_WORKSPACE"], **safe)  # type: ignore[arg-type]
    say("actions/cache/restore", f"restored {matched} (asked {key})")
    write_output("cache-hit", "true" if matched == key else "false")
    write_output("cache-matched-key", matched)
    return 0


def cache_save() -> int:
    """Saves `path` under `key`; a key that exists is kept, with a warning, as the real one does."""
    key = given("key")
    archive_path = store() / "caches" / f"{key}.tar"
    if archive_path.exists():
        say("actions/cache/save", f"cache {key} exists")
        print(
            f"::warning::Failed to save: Unable to reserve cache with key {key}, another job may be creating this cache."
        )
        return 0
    archive_path.parent.mkdir(parents=True, exist_ok=True)
    workspace = Path(os.environ["GITHUB_WORKSPACE"])
    paths = [workspace_path(line) for line in given("path").splitlines() if line.strip()]
    existing = [path for path in paths if path.exists()]
    if not existing:
        print(
            "::warning::Path Validation Error: Path(s) specified in the action for caching do(es) not exist, hence no cache is being saved."
        )
        return 0
    with tarfile.open(archive_path, "w") as archive:
        for path in existing:
            archive.add(path, arcname=os.path.relpath(path, workspace))
    say("actions/cache/save", f"saved {key}")
    return 0


STAND_INS: dict[str, Callable[[], int]] = {
    "checkout": checkout,
    "setup-python": setup_python,
    "upload-artifact": upload_artifact,
    "download-artifact": download_artifact,
    "cache-restore": cache_restore,
    "cache-save": cache_save,
}


def main() -> int:
    return STAND_INS[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
