"""The real parts a rehearsal runs instead of stand-ins (--real): which are at hand here, and why not the others."""

# Two of the guide's parts run here without an NPU and without the internet: uv (the real binary, offline,
# against a directory of wheels) and mooncake_master (the binary of the exact NPU wheel the guide installs,
# which needs only Debian's libibverbs1, libnuma1 and libcurl4 and binds 0.0.0.0, so only inside the
# rehearsal's private network namespace). `python -m ci.rehearsal.parts fetch DIR` downloads the wheels
# the guide installs into DIR (the wheelhouse); `ci.rehearse --real --wheelhouse DIR` then uses them. A
# part that cannot be had falls back to its stand-in, and the report says why; with
# GUIDE_GUARD_REQUIRE_EXTERNAL=1 (as .ci/run sets) a fallback is an error instead.

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.cli import find_tool

__all__ = [
    "MOONCAKE_WHEEL",
    "REAL_WHEELS",
    "REQUIRE_ENV",
    "WHEELHOUSE_ENV",
    "Part",
    "Parts",
    "choose_parts",
    "fetch",
    "main",
]

MOONCAKE_WHEEL = "mooncake-transfer-engine-npu==0.3.13.post1"  # what the guide's build-mooncake installs
# What the guide's `uv pip install` lines ask for that the rehearsal takes from the package index (accelerate
# and SpecForge stay stand-ins: the real ones need a real torch). py-spy: the monitor's teardown path.
REAL_WHEELS = ("huggingface_hub", MOONCAKE_WHEEL, "py-spy")
WHEELHOUSE_ENV = "GUIDE_GUARD_WHEELHOUSE"  # the default of --wheelhouse
REQUIRE_ENV = "GUIDE_GUARD_REQUIRE_EXTERNAL"  # 1: a real part that cannot be had is an error, not a fallback
UV_ENV = "GUIDE_GUARD_UV"  # the uv to run, when not the one beside this interpreter or on PATH
_SYSTEM_LIBRARIES = ("libibverbs.so.1", "libnuma.so.1", "libcurl.so.4")  # the wheel's DT_NEEDED from Debian


@dataclass(frozen=True)
class Part:
    """One part of the guide's machine: the real thing, or its stand-in and why."""

    name: str  # as the report names it
    real: bool
    how: str  # what runs (a path, a wheel), or why the stand-in runs instead


@dataclass(frozen=True)
class Parts:
    """What a rehearsal runs for uv and Mooncake."""

    mode: str  # "simulated" (--simulated, the default) or "real" (--real)
    uv: Part
    mooncake: Part
    uv_program: str | None  # the real uv, when uv.real
    wheelhouse: Path | None  # its wheels, when uv.real
    mooncake_wheel: Path | None  # the real wheel, when mooncake.real

    @property
    def fallbacks(self) -> list[Part]:
        """The parts asked for real that run as stand-ins."""
        return [part for part in (self.uv, self.mooncake) if self.mode == "real" and not part.real]


def _stand_ins(mode: str, uv_why: str, mooncake_why: str) -> Parts:
    return Parts(mode, Part("uv", False, uv_why), Part("mooncake", False, mooncake_why), None, None, None)


def choose_parts(mode: str, wheelhouse: str | None, *, isolated: bool) -> Parts:
    """The parts a rehearsal in this mode runs on this machine: real where they can be had."""
    if mode == "simulated":
        return _stand_ins(mode, "the stand-in (--simulated)", "the stand-in (--simulated)")
    uv_program, uv_version, uv_problem = _real_uv()
    chosen = wheelhouse or os.environ.get(WHEELHOUSE_ENV, "")
    house = Path(chosen).absolute() if chosen else None
    house_problem = _wheelhouse_problem(house)
    if uv_program is None or house is None or house_problem:
        why = uv_problem or house_problem or "no wheelhouse"
        return _stand_ins(mode, f"the stand-in: {why}", "the stand-in: the real wheel needs the real uv")
    uv = Part("uv", True, f"{uv_program} ({uv_version}), offline against the wheels of {house}")
    wheel = _compatible_wheel(house, *MOONCAKE_WHEEL.split("=="))
    problems = [] if wheel else [f"no {MOONCAKE_WHEEL} wheel for this Python and machine in {house}"]
    problems += [f"{name} cannot be loaded (Debian: apt-get install {_package(name)})" for name in _missing_libraries()]
    if not isolated:
        problems.append("no private network namespace here, and the real mooncake_master binds 0.0.0.0")
    problems += [f"{tool} not found (the stand-in CANN runtime is built with it)" for tool in _missing_build_tools()]
    if problems or wheel is None:
        return Parts(mode, uv, Part("mooncake", False, "the stand-in: " + "; ".join(problems)), uv_program, house, None)
    mooncake = Part("mooncake", True, f"{wheel.name}; its mooncake_master binds 0.0.0.0 in the private namespace")
    return Parts(mode, uv, mooncake, uv_program, house, wheel)


def _real_uv() -> tuple[str | None, str, str]:
    """The real uv, what its --version says, and why there is none."""
    program = find_tool("uv", UV_ENV)
    if program is None:
        return None, "", f"no uv beside this Python or on PATH (pip install uv, or set {UV_ENV})"
    version = _version(program)
    if not version.startswith("uv "):
        return None, "", f"{program} --version did not answer as uv does"
    return program, version, ""


def _version(program: str) -> str:
    try:
        done = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not runnable: {exc}"
    return done.stdout.strip()


def _wheelhouse_problem(house: Path | None) -> str:
    hint = "fetch the guide's wheels with `python -m ci.rehearsal.parts fetch DIR`, then --wheelhouse DIR"
    if house is None:
        return f"no wheelhouse ({hint}, or {WHEELHOUSE_ENV}=DIR)"
    if not house.is_dir():
        return f"the wheelhouse {house} is not a directory ({hint})"
    if _compatible_wheel(house, "huggingface_hub") is None:
        return f"the wheelhouse {house} has no huggingface_hub wheel ({hint})"
    return ""


def _compatible_wheel(house: Path, name: str, version: str | None = None) -> Path | None:
    """A wheel of the project in the wheelhouse that this interpreter can install, if any."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    supported = set(sys_tags())
    for wheel in sorted(house.glob("*.whl")):
        try:
            project, found, _, tags = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename:
            continue
        if project != canonicalize_name(name) or (version is not None and str(found) != version):
            continue
        if tags & supported:
            return wheel
    return None


def _missing_libraries() -> list[str]:
    missing = []
    for name in _SYSTEM_LIBRARIES:
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


def _package(library: str) -> str:
    return {"libibverbs.so.1": "libibverbs1", "libnuma.so.1": "libnuma1", "libcurl.so.4": "libcurl4"}[library]


def _missing_build_tools() -> list[str]:
    return [tool for tool in ("cc", "ldd") if shutil.which(tool) is None]


def fetch(directory: Path) -> list[str]:
    """Download the wheels the guide installs, and what they depend on, into directory with this Python's pip.

    Returns the requirements that could not be fetched (the Mooncake wheel exists for CPython 3.11 only).
    """
    directory.mkdir(parents=True, exist_ok=True)
    failed = []
    for requirement in REAL_WHEELS:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(directory), requirement]
        if subprocess.run(command, stdin=subprocess.DEVNULL, check=False).returncode != 0:
            failed.append(requirement)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ci.rehearsal.parts",
        description="Fetch the wheels a --real rehearsal installs with the real uv: " + ", ".join(REAL_WHEELS),
    )
    parser.add_argument("action", choices=("fetch",))
    parser.add_argument("directory", metavar="DIR", help="the wheelhouse (ci.rehearse --real --wheelhouse DIR)")
    args = parser.parse_args(argv)
    failed = fetch(Path(args.directory))
    for requirement in failed:
        print(f"[ERROR] rehearsal: pip could not download {requirement} into {args.directory}", file=sys.stderr)
    if not failed:
        print(f"rehearsal: the wheels of {', '.join(REAL_WHEELS)} are in {args.directory}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
