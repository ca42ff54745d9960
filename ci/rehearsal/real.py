"""The real parts in a sandbox: the wheels the real uv installs from, the CANN runtime stand-in, uv's settings."""

# choose_parts (ci/rehearsal/parts.py) says which parts run real; this puts them in place. The real uv
# reads one directory of wheels, offline: the stand-ins' wheels (accelerate always; Mooncake's when its
# real wheel is not used), built with their own backend, and links to the wheelhouse's wheels (the real
# Mooncake wheel left out when it is not used, so uv cannot pick it). With the real Mooncake wheel, the
# simulated CANN gets stand-in runtime libraries (ci/rehearsal/cann_runtime.py) on LD_LIBRARY_PATH.

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ci.rehearsal.cann_runtime import build_cann_runtime
from ci.rehearsal.model import Rehearsal, SetupError, Simulation
from ci.rehearsal.parts import Parts

__all__ = ["REAL_UV_ENV", "use_real_parts"]

REAL_UV_ENV = "REHEARSAL_REAL_UV"  # the fake uv's cue: record the call, then exec this real uv
_STAND_IN_MOONCAKE = "mooncake-transfer-engine-npu"  # its project folder in the simulated index


def _build_wheel(project: Path, directory: Path) -> None:
    build = "import rehearsal_build_backend as b, sys; print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", build, str(directory)], cwd=project, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SetupError(f"the stand-in {project.name} could not be built as a wheel: {done.stderr.strip()}")


def _make_wheels(plan: Rehearsal, parts: Parts) -> None:
    wheels = plan.sandbox.wheels
    wheels.mkdir()
    for project in sorted((plan.sandbox.base / "index").iterdir()):
        if not (project.name == _STAND_IN_MOONCAKE and parts.mooncake.real):
            _build_wheel(project, wheels)
    assert parts.wheelhouse is not None  # a real uv comes with its wheelhouse
    for wheel in sorted(parts.wheelhouse.glob("*.whl")):
        if wheel.name.startswith("mooncake_transfer_engine_npu-") and wheel != parts.mooncake_wheel:
            continue
        (wheels / wheel.name).symlink_to(wheel)


def use_real_parts(plan: Rehearsal, parts: Parts) -> None:
    """Put the real parts of `parts` into the prepared sandbox and ci.run's environment; SetupError if one fails."""
    if not parts.uv.real:
        return
    assert parts.uv_program is not None
    _make_wheels(plan, parts)
    sandbox = plan.sandbox
    plan.env[REAL_UV_ENV] = parts.uv_program
    why = "the real uv installs offline, from the sandbox's wheels only"
    plan.override("UV_OFFLINE", "1", why)
    plan.override("UV_FIND_LINKS", str(sandbox.wheels), why)
    plan.override("UV_CACHE_DIR", str(sandbox.base / "uv-cache"), "uv's cache stays in the sandbox")
    plan.override("UV_NO_CONFIG", "1", "no uv.toml of the machine or the caller changes what uv does")
    plan.override("UV_PYTHON_DOWNLOADS", "never", "uv never fetches an interpreter")
    plan.override("UV_LINK_MODE", "copy", "installs never hard-link into uv's cache, whatever the file systems")
    if not parts.mooncake.real:
        return
    assert parts.mooncake_wheel is not None
    try:
        runtime = build_cann_runtime(parts.mooncake_wheel, sandbox.cann_runtime)
    except OSError as exc:
        raise SetupError(f"the stand-in CANN runtime for the real Mooncake wheel: {exc}") from exc
    library_path = ":".join(filter(None, [str(runtime.directory), os.environ.get("LD_LIBRARY_PATH", "")]))
    plan.override("LD_LIBRARY_PATH", library_path, "CANN's runtime libraries (stand-ins), as CANN's set_env.sh adds")
    plan.simulations.append(
        Simulation(
            "CANN runtime libraries",
            "libascendcl.so and the other CANN libraries the Mooncake wheel links against",
            f"{', '.join(runtime.libraries)} in {runtime.directory}: {runtime.symbols} functions, named after the "
            "wheel's undefined symbols",
            "every function aborts when called: the real wheel loads, and nothing may call CANN",
        )
    )
