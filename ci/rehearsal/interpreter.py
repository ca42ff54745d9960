"""The image's Python in a sandbox: a virtualenv (the default), or a system Python with no virtualenv at all."""

# The 910B image's `python` may be a virtualenv's or the system's. A real `uv pip install` treats them
# differently: with no virtualenv active it refuses unless told which interpreter (`--python`, `--system`).
# The default sandbox has a virtualenv, active through VIRTUAL_ENV; REHEARSAL_BREAK=uv-no-venv gives the
# guide a system Python instead: a prefix of its own in the sandbox, whose standard library is the harness
# interpreter's (linked, not copied) and whose site-packages is its own, so that installs stay in the
# sandbox while the interpreter is, to uv and to Python, not a virtualenv (sys.prefix == sys.base_prefix).

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from pathlib import Path

from ci.rehearsal.model import Sandbox, SetupError, run_checked

__all__ = ["make_python"]

BREAK_NAME = "REHEARSAL_BREAK=uv-no-venv"


def _harness_site_dirs() -> list[str]:
    """The harness's own package directories: huggingface_hub, click, PyYAML, pip come from here."""
    return [
        entry
        for entry in sys.path
        if os.path.basename(entry.rstrip("/")) in ("site-packages", "dist-packages") and os.path.isdir(entry)
    ]


def _make_venv(sandbox: Sandbox) -> Path:
    run_checked([sys.executable, "-m", "venv", "--without-pip", str(sandbox.python_env)])
    return sandbox.python_env / "bin" / "python"


def _make_system_python(sandbox: Sandbox) -> Path:
    """A prefix whose interpreter finds its standard library there (linked to the harness's) and no pyvenv.cfg."""
    prefix = sandbox.python_env
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths()["stdlib"])  # the base interpreter's, also from inside a virtualenv
    interpreter = Path(sys.base_prefix) / "bin" / version
    if not interpreter.is_file() or not (stdlib / "os.py").is_file():
        raise SetupError(f"no system Python to copy for {BREAK_NAME}: {interpreter} or {stdlib}/os.py is missing")
    library = prefix / "lib" / version
    library.mkdir(parents=True)
    (prefix / "bin").mkdir()
    for entry in stdlib.iterdir():
        # its own site-packages; and never the distribution's marker that makes pip and uv refuse to install
        if entry.name not in ("site-packages", "dist-packages", "EXTERNALLY-MANAGED"):
            (library / entry.name).symlink_to(entry)
    (library / "site-packages").mkdir()
    python = prefix / "bin" / version
    python.write_bytes(interpreter.read_bytes())  # a copy: a symbolic link would find the harness's prefix
    python.chmod(0o755)
    (prefix / "bin" / "python").symlink_to(version)
    (prefix / "bin" / "python3").symlink_to(version)
    found = run_checked([str(python), "-c", "import sys; print(sys.prefix == sys.base_prefix, sys.prefix)"]).split()
    if found != ["True", str(prefix)]:
        raise SetupError(f"{python} does not take {prefix} as its prefix ({' '.join(found)})")
    return prefix / "bin" / "python"


def make_python(sandbox: Sandbox) -> Path:
    """The image's interpreter, seeing the simulated image's packages and the harness's own, and `python` shims."""
    python = _make_system_python(sandbox) if sandbox.system_python else _make_venv(sandbox)
    site_packages = Path(
        run_checked([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    )
    lines = [str(sandbox.base / "image"), str(sandbox.base / "sgl-workspace" / "sglang" / "python")]
    # `import` lines in a .pth run at start-up: addsitedir also reads the harness's own .pth files;
    # rehearsal_observe records which block imports which part (the report's parts per block);
    # rehearsal_hub_client is the store-polluted knob, when it is the one in effect (imported first, so that
    # rehearsal_observe's finder still sees every import before it)
    lines += [f"import site; site.addsitedir({entry!r})" for entry in _harness_site_dirs()]
    lines += ["import rehearsal_hub_client", "import rehearsal_observe"]
    site_packages.mkdir(parents=True, exist_ok=True)
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
    kind = "a system Python, no virtualenv" if sandbox.system_python else "a virtualenv"
    for name in ("python", "python3"):
        shim = sandbox.bin / name
        shim.write_text(
            "#!/bin/sh\n"
            f"# [simulation] guide-guard rehearsal: `{name}` is the sandbox's interpreter (Python {version}, {kind}),\n"
            "# which sees the simulated image's packages (torch, torch_npu, sglang) and what uv installed.\n"
            f'{version_answer}exec {python} "$@"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
    return python
