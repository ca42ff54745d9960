"""A minimal PEP 517 backend for the rehearsal's stand-in projects: a pure-Python wheel, nothing to download."""

# ci.rehearse copies it into each stand-in project as `rehearsal_build_backend.py`, so the fake uv builds
# them offline, with no setuptools in the environment.

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli (pytest's and mypy's dependency there), else pip's copy
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        from pip._vendor import tomli as tomllib


def _project() -> dict[str, Any]:
    with open("pyproject.toml", "rb") as handle:
        data = tomllib.load(handle)
    project: dict[str, Any] = data["project"]
    project["packages"] = data.get("tool", {}).get("rehearsal", {}).get("packages", [])
    return project


def _dist_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    project = _project()
    name, version = project["name"], project["version"]
    dist_info = f"{_dist_name(name)}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for package in project["packages"]:
        for path in sorted(Path(package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.as_posix()] = path.read_bytes()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {project.get('description', '')}\n"
    files[f"{dist_info}/METADATA"] = metadata.encode()
    wheel = "Wheel-Version: 1.0\nGenerator: rehearsal_build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist_info}/WHEEL"] = wheel.encode()
    scripts = project.get("scripts", {})
    if scripts:
        lines = "".join(f"{script} = {target}\n" for script, target in scripts.items())
        files[f"{dist_info}/entry_points.txt"] = f"[console_scripts]\n{lines}".encode()
    record = [_record_line(path, data) for path, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{_dist_name(name)}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel_name
