#!/usr/bin/env python3
"""[simulation] The rehearsal's fake command-line tools: one program that answers to several names."""

# ci.rehearse installs it in the sandbox's bin/ and links `uv`, `apt-get`, `npu-smi` and `pkill` to it (and
# `curl`, on a machine that has none); the name it was called by picks the tool. Every call is recorded in
# the sandbox's calls.jsonl.

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import rehearsal_simulation
from rehearsal_simulation import say

INDEX_ENV = "REHEARSAL_INDEX"  # directory of stand-in projects, one per package name
PY_SPY_ENV = "REHEARSAL_PY_SPY"  # the harness's own py-spy, "installed" by linking it

NPU_SMI_TABLE = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 25.5.2                   Version: 25.5.2                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
{cards}+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
{idle}+===========================+===============+====================================================+"""

NPU_SMI_CARD = """\
| {n}     910B4               | OK            | 89.9        39                0    / 0             |
| {n}                         | 0000:4{b}:00.0  | 0           0    / 0          2922 / 32768         |
+===========================+===============+====================================================+
"""


# -- uv -----------------------------------------------------------------------------------------


REAL_UV_ENV = "REHEARSAL_REAL_UV"  # the real uv, when the rehearsal runs it (--real): this fake records, then execs it
TOOL_ENV = "REHEARSAL_TOOL"  # set when this program re-runs itself under another interpreter: the tool's name
NO_VENV = (
    "error: No virtual environment found; run `uv venv` to create an environment, "
    "or pass `--system` to install into a non-virtual environment"
)


def uv(argv: list[str]) -> int:
    """`uv pip install`: the real uv where the rehearsal has one, else a simulation of its offline installs."""
    real = os.environ.get(REAL_UV_ENV, "")
    if real:
        os.execv(real, ["uv", *argv])  # recorded by main(); the real one reads UV_OFFLINE and UV_FIND_LINKS
    if argv[:2] != ["pip", "install"]:
        say(f"uv: only `uv pip install` is simulated, not `uv {' '.join(argv)}`")
        return 2
    options, python, system = [], None, os.environ.get("UV_SYSTEM_PYTHON", "") in ("1", "true")
    args = iter(argv[2:])
    for arg in args:
        if arg.partition("=")[0] in ("-p", "--python"):
            python = arg.partition("=")[2] or next(args, "")
        elif arg == "--system":
            system = True
        else:
            options.append(arg)
    target = _target_interpreter(python, system)
    if target is None:
        return 2
    # The installs happen in a copy of this program run by the target interpreter, so that its paths are
    # the target environment's (a virtualenv's or a system Python's), as with the real uv.
    program = os.path.realpath(sys.argv[0])
    return os.spawnve(os.P_WAIT, target, [target, program, *options], {**os.environ, TOOL_ENV: "uv-install"})


def _target_interpreter(python: str | None, system: bool) -> str | None:
    """The interpreter whose environment uv installs into, found as the real uv finds it; None: refused (said)."""
    import shutil

    if python is not None:
        found = python if os.sep in python else shutil.which(python)
        if found is None or not os.access(found, os.X_OK):
            print(
                f"error: No virtual environment or system Python installation found for path `{python}`; "
                "run `uv venv` to create an environment",
                file=sys.stderr,
            )
            return None
        return found
    if system:
        found = shutil.which("python3") or shutil.which("python")
        if found is None:
            print("error: No system Python installation found", file=sys.stderr)
        return found
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if os.environ.get(variable):
            return os.path.join(os.environ[variable], "bin", "python")
    for directory in [Path.cwd(), *Path.cwd().parents]:
        if (directory / ".venv" / "pyvenv.cfg").is_file():
            return str(directory / ".venv" / "bin" / "python")
    print(NO_VENV, file=sys.stderr)
    return None


def uv_install(argv: list[str]) -> int:
    """The installs of `uv pip install`, run by the target environment's interpreter."""
    quiet = False
    requirements: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--no-deps":
            continue  # the stand-ins declare no dependencies
        if arg in ("-q", "--quiet"):
            quiet = True
        elif arg in ("-U", "--upgrade"):
            continue  # every install here is a fresh build of the stand-in
        elif arg.partition("=")[0] in ("-i", "--index-url", "--extra-index-url"):
            url = arg.partition("=")[2] or next(args, "")
            say(f"uv: index {url} is not contacted (offline rehearsal)")
        elif arg.startswith("-"):
            say(f"uv: option {arg} is not simulated")
            return 2
        else:
            requirements.append(arg)
    if not requirements:
        say("uv: nothing to install")
        return 2
    for requirement in requirements:
        code = _install(requirement, quiet=quiet)
        if code:
            return code
    return 0


def _install(requirement: str, *, quiet: bool) -> int:
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    def tell(text: str) -> None:
        if not quiet:
            say(f"uv: {text}")

    if requirement.startswith((".", "/")) or os.path.isdir(requirement):
        code = _build_and_install(Path(requirement).resolve())
        tell(f"built and installed the project at {Path(requirement).resolve()} into {sys.prefix} (offline)")
        return code
    try:
        wanted = Requirement(requirement)
    except InvalidRequirement as exc:
        say(f"uv: error: {exc}")
        return 2
    name = canonicalize_name(wanted.name)
    project = Path(os.environ.get(INDEX_ENV, "/nonexistent"), name)
    if project.is_dir():
        version = _project_version(project)
        if not wanted.specifier.contains(version, prereleases=True):
            say(f"uv: No solution found: {requirement} (the simulated index has {name}=={version})")
            return 1
        code = _build_and_install(project)
        tell(f"installed {name}=={version} from the rehearsal's simulated index (offline)")
        return code
    if name == "py-spy":
        return _link_py_spy(tell)
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        say(
            f"uv: no simulation of {name!r} (offline rehearsal); add a stand-in under ci/rehearsal/simulations/packages/"
        )
        return 1
    if not wanted.specifier.contains(installed, prereleases=True):
        say(f"uv: {name}=={installed} is what the rehearsal environment has; {requirement} cannot be simulated")
        return 1
    tell(f"{name}=={installed} is already in the rehearsal environment; nothing downloaded (offline)")
    return 0


def _project_version(project: Path) -> str:
    match = re.search(r'^version\s*=\s*"([^"]+)"', (project / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    if match is None:
        raise SystemExit(f"[simulation] uv: {project}/pyproject.toml has no version")
    return match.group(1)


def _build_and_install(project: Path) -> int:
    """Build the project's wheel with its own PEP 517 backend, then install it, as uv does (no pip, offline)."""
    import subprocess
    import tempfile

    backend, backend_path = _offline_backend(project)
    with tempfile.TemporaryDirectory(prefix="uv-build-") as wheel_dir:
        build = (
            "import importlib, sys\n"
            f"sys.path[:0] = {backend_path!r}\n"
            f"print(importlib.import_module({backend!r}).build_wheel({wheel_dir!r}))\n"
        )
        done = subprocess.run([sys.executable, "-c", build], cwd=project, capture_output=True, text=True)
        if done.returncode != 0:
            say(f"uv: building {project} failed:\n{done.stderr}")
            return 1
        _install_wheel(Path(wheel_dir) / done.stdout.strip().splitlines()[-1])
    return 0


def _offline_backend(project: Path) -> tuple[str, list[str]]:
    """The project's build backend, which must need nothing from an index (the rehearsal is offline)."""
    text = (project / "pyproject.toml").read_text(encoding="utf-8")
    backend = re.search(r'^build-backend\s*=\s*"([^"]+)"', text, re.M)
    requires = re.search(r"^requires\s*=\s*\[(.*?)\]", text, re.M | re.S)
    if backend is None or requires is None or requires.group(1).strip():
        raise SystemExit(f"[simulation] uv: {project} needs build requirements from an index; offline, only none")
    paths = re.search(r"^backend-path\s*=\s*\[(.*?)\]", text, re.M | re.S)
    entries = re.findall(r'"([^"]+)"', paths.group(1)) if paths else []
    return backend.group(1), [str(project / entry) for entry in entries]


def _install_wheel(wheel: Path) -> None:
    """Unpack a pure-Python wheel into the sandbox venv and write its console scripts."""
    import configparser
    import sysconfig
    import zipfile

    paths = sysconfig.get_paths()
    site, scripts = Path(paths["purelib"]), Path(paths["scripts"])
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = next(name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info"))
        _uninstall(site, dist_info.split("-")[0])
        archive.extractall(site)
    record = [f"{name},," for name in names]
    entry_points = site / dist_info / "entry_points.txt"
    if entry_points.is_file():
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # script names keep their case
        parser.read(entry_points, encoding="utf-8")
        for script, target in parser["console_scripts"].items() if parser.has_section("console_scripts") else []:
            module, _, function = target.strip().partition(":")
            path = scripts / script
            path.write_text(
                f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n",
                encoding="utf-8",
            )
            path.chmod(0o755)
            record.append(f"{os.path.relpath(path, site)},,")
    (site / dist_info / "INSTALLER").write_text("uv (guide-guard rehearsal stand-in)\n", encoding="utf-8")
    (site / dist_info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")


def _uninstall(site: Path, dist_name: str) -> None:
    """Remove an installed distribution of the same name (an upgrade or a reinstall)."""
    import shutil

    for old in site.glob(f"{dist_name}-*.dist-info"):
        record = old / "RECORD"
        lines = record.read_text(encoding="utf-8").splitlines() if record.is_file() else []
        for line in lines:
            target = (site / line.split(",")[0]).resolve()
            if target.is_file() and not target.is_relative_to(old.resolve()):
                target.unlink()
        shutil.rmtree(old, ignore_errors=True)


def _link_py_spy(tell: Callable[[str], None]) -> int:
    source = os.environ.get(PY_SPY_ENV, "")
    if not source or not os.access(source, os.X_OK):
        say("uv: py-spy is not available offline (the harness has none to lend)")
        return 1
    target = Path(sys.executable).parent / "py-spy"
    if not target.exists():
        target.symlink_to(source)
    tell(f"py-spy: linked the harness's own {source} (offline)")
    return 0


# -- apt-get, npu-smi -------------------------------------------------------------------------


def apt_get(argv: list[str]) -> int:
    say(f"apt-get {' '.join(argv)}: recorded; nothing installed (the rehearsal leaves the system alone)")
    return 0


def npu_smi(argv: list[str]) -> int:
    if argv[:1] != ["info"]:
        say(f"npu-smi: only `npu-smi info` is simulated, not {argv}")
        return 2
    cards = "".join(NPU_SMI_CARD.format(n=n, b=n + 1) for n in range(4))
    idle = "".join(f"| No running processes found in NPU {n:<61}|\n" for n in range(4))
    print("[simulation] npu-smi: guide-guard rehearsal stand-in, 4 simulated Ascend 910B4 cards")
    print(NPU_SMI_TABLE.format(cards=cards, idle=idle))
    return 0


# -- pkill ------------------------------------------------------------------------------------


def pkill(argv: list[str]) -> int:
    """pkill limited to the rehearsal's own processes: a guide's cleanup never reaches the machine's."""
    signum = signal.SIGTERM
    full = False
    parents: set[int] = set()
    pattern: str | None = None
    args = iter(argv)
    for arg in args:
        if arg == "-f":
            full = True
        elif arg == "-P":
            parents = {int(pid) for pid in next(args, "").split(",") if pid}
        elif arg == "--signal":
            signum = _signal(next(args, ""))
        elif arg.startswith("-") and len(arg) > 1:
            signum = _signal(arg[1:])
        else:
            pattern = arg
    if pattern is None and not parents:
        say("pkill: no matching criteria specified")
        return 2
    matched = 0
    for pid in _rehearsal_pids():
        if parents and _parent(pid) not in parents:
            continue
        if pattern is not None and not re.search(pattern, _describe(pid, full)):
            continue
        try:
            os.kill(pid, signum)
            matched += 1
        except ProcessLookupError:
            continue
    say(f"pkill {' '.join(argv)}: {matched} of the rehearsal's own processes signalled (no others are candidates)")
    return 0 if matched else 1


def _signal(name: str) -> signal.Signals:
    if name.isdigit():
        return signal.Signals(int(name))
    return signal.Signals[name.upper() if name.upper().startswith("SIG") else "SIG" + name.upper()]


def _rehearsal_pids() -> list[int]:
    marker = f"{rehearsal_simulation.SANDBOX_ENV}={os.environ.get(rehearsal_simulation.SANDBOX_ENV, '')}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _describe(pid: int, full: bool) -> str:
    try:
        if full:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                return handle.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


# -- curl (only on a machine without one) -----------------------------------------------------


def curl(argv: list[str]) -> int:
    """The `curl -fsS URL` the guide uses, for machines without curl."""
    import urllib.error
    import urllib.request

    fail = show_errors = False
    urls = []
    for arg in argv:
        if arg.startswith("-") and not arg.startswith("--"):
            fail |= "f" in arg
            show_errors |= "S" in arg
        elif arg.startswith("--"):
            say(f"curl: option {arg} is not simulated")
            return 2
        else:
            urls.append(arg)
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                sys.stdout.buffer.write(response.read())
        except urllib.error.HTTPError as exc:
            if show_errors:
                print(f"curl: (22) The requested URL returned error: {exc.code}", file=sys.stderr)
            if fail:
                return 22
            sys.stdout.buffer.write(exc.read())
        except OSError as exc:
            if show_errors:
                print(f"curl: (7) Failed to connect: {exc}", file=sys.stderr)
            return 7
    return 0


TOOLS: dict[str, Callable[[list[str]], int]] = {
    "uv": uv,
    "uv-install": uv_install,
    "apt-get": apt_get,
    "npu-smi": npu_smi,
    "pkill": pkill,
    "curl": curl,
}


def main() -> int:
    name = os.environ.pop(TOOL_ENV, "") or os.path.basename(sys.argv[0])
    tool = TOOLS.get(name)
    if tool is None:
        say(f"{name}: not one of the rehearsal's fake tools ({', '.join(TOOLS)})")
        return 2
    if name != "uv-install":  # the second half of a recorded `uv` call
        rehearsal_simulation.record(name, real=name == "uv" and bool(os.environ.get(REAL_UV_ENV)))
    return tool(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
