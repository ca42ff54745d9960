"""The container engine of the act layer: podman serving the Docker API on a socket of our own, and the job image.

nektos/act runs a `container:` job through a Docker API: it creates the job's container from the image and
runs every step in it with `docker exec`, as GitHub's runner does. Here that API is Debian's podman
(`podman system service`), configured by files in a state directory of its own (containers.conf,
storage.conf, registries.conf: nothing under /etc is changed), with its images and containers stored there
too. No image registry is reachable, so the image is built from the machine's Debian package sources with
mmdebstrap and imported; and as pip in a container cannot reach the package index, the harness's
dependencies are downloaded on the host into a wheelhouse that a job mounts (`container_options`).

    python tests/act/engine.py check    # what is missing, exit 1 if anything is
    python tests/act/engine.py install  # apt-get the missing tools (what .ci/run calls, as root)
    python tests/act/engine.py start    # config, service, image, wheelhouse; prints DOCKER_HOST=...
    python tests/act/engine.py stop     # containers, service, conmon: nothing of ours left running

Every command takes --state-dir (default $GUIDE_GUARD_ACT_STATE, else ~/.cache/guide-guard/act-engine) and is
idempotent: `start` reuses a service that answers and an image or wheelhouse whose content key matches.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "APT_PACKAGES",
    "IMAGE",
    "Engine",
    "EngineUnavailable",
    "check",
    "default_state_dir",
    "engine_processes",
    "install",
    "start",
    "stop",
]

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/guide-guard-act:bookworm"
SUITE = "bookworm"
# The Debian packages that provide the engine: podman with runc (Debian's crun 1.8 refuses this VM's hybrid
# cgroup layout) and mmdebstrap for the image.
APT_PACKAGES = ("podman", "runc", "mmdebstrap")
TOOLS = {"podman": "podman", "runc": "runc", "conmon": "conmon", "mmdebstrap": "mmdebstrap"}
# What the NPU job's steps need of the image (guide-run.yml, action.yml): bash and coreutils come with
# minbase; python-is-python3 the `python` a guide calls (the guides' images have it); python3-venv gives
# the venv its pip (ensurepip); procps for ps and the cancelled() step's checks;
# nodejs because act runs a JavaScript action's `node` inside the job container.
IMAGE_PACKAGES = ("python3", "python-is-python3", "python3-venv", "procps", "jq", "git", "ca-certificates", "nodejs")
# GitHub's runner sets HOME=/github/home in a job container (actions/runner#863); act does not
# (nektos/act#710), so the image does.
IMAGE_HOME = "/github/home"
# Where a job mounts the wheelhouse, and the index URL the composite action's `index-url` input takes.
WHEELHOUSE_MOUNT = "/opt/guide-guard-wheels"
KEY_LABEL = "guide-guard.image-key"
# conmon and podman's cleanup processes wait this long after a container exits (podman's default is 300 s).
EXIT_COMMAND_DELAY_S = 5
SERVICE_START_TIMEOUT_S = 30.0
SERVICE_PROGRAMS = ("catatonit", "podman")
SERVICE_STOP_TIMEOUT_S = 10.0
INSTALL_HINT = f"apt-get update && apt-get install -y {' '.join(APT_PACKAGES)}"


class EngineUnavailable(Exception):
    """No container engine can be had here; the message says why (the act layer skips, or fails in CI, with it)."""


@dataclass(frozen=True)
class Engine:
    """A running podman API service and what a job needs from it."""

    state_dir: Path  # the configuration, storage, socket and logs
    docker_host: str  # DOCKER_HOST for act and the docker CLI, unix:///...
    image: str  # the job image, present in the service's storage
    wheelhouse: Path  # on the host: a PEP 503 index of the harness's wheels, under simple/
    container_options: str  # `docker create` options that mount the wheelhouse at WHEELHOUSE_MOUNT
    index_url: str  # that index as seen inside the job container (action.yml's `index-url`)

    @property
    def podman_env(self) -> dict[str, str]:
        """The environment under which the podman CLI sees this engine's storage and configuration."""
        return podman_env(self.state_dir)


def default_state_dir() -> Path:
    configured = os.environ.get("GUIDE_GUARD_ACT_STATE")
    return Path(configured) if configured else Path.home() / ".cache" / "guide-guard" / "act-engine"


def _paths(state_dir: Path) -> dict[str, Path]:
    return {
        "containers_conf": state_dir / "containers.conf",
        "storage_conf": state_dir / "storage.conf",
        "registries_conf": state_dir / "registries.conf",
        "storage": state_dir / "storage",
        # podman's runtime state; emptied before a new service starts, which podman takes for a reboot
        "run": state_dir / "run",
        "socket": state_dir / "podman.sock",
        "pid": state_dir / "service.pid",
        "log": state_dir / "service.log",
        "wheelhouse": state_dir / "wheelhouse",
    }


def podman_env(state_dir: Path) -> dict[str, str]:
    paths = _paths(state_dir)
    return {
        **os.environ,
        "CONTAINERS_CONF": str(paths["containers_conf"]),
        "CONTAINERS_STORAGE_CONF": str(paths["storage_conf"]),
        "CONTAINERS_REGISTRIES_CONF": str(paths["registries_conf"]),
    }


def missing_tools() -> list[str]:
    """The commands the engine needs that are not on PATH, each with the Debian package that has it."""
    return [f"{tool} (package {package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]


def check() -> None:
    """Raise EngineUnavailable, saying exactly what is missing, where no engine can be started here."""
    if sys.platform != "linux":
        raise EngineUnavailable(f"the act layer's container engine needs Linux, not {sys.platform}")
    if os.geteuid() != 0:
        raise EngineUnavailable("the act layer's container engine runs podman as root, and this user is not root")
    missing = missing_tools()
    if missing:
        raise EngineUnavailable(f"missing {', '.join(missing)}: install them with `{INSTALL_HINT}`")
    if not Path("/etc/apt").is_dir():
        raise EngineUnavailable("no /etc/apt: the image is built from this machine's Debian package sources")


def install() -> None:
    """Install the engine's Debian packages where a tool is missing (as .ci/run does, as root)."""
    if not missing_tools():
        return
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=environment)
    subprocess.run(["apt-get", "install", "-y", "-qq", *APT_PACKAGES], check=True, env=environment)


def _hard_limit(which: int) -> int | None:
    hard = resource.getrlimit(which)[1]
    return None if hard == resource.RLIM_INFINITY else hard


def containers_conf(state_dir: Path) -> str:
    """containers.conf for this machine: the settings below are the ones podman's defaults get wrong here."""
    paths = _paths(state_dir)
    # podman as root raises a container's nofile and nproc above the caller's hard limits, which root without
    # CAP_SYS_RESOURCE (as on this VM) may not: runc then fails with "error setting rlimits ... operation not
    # permitted". The caller's own limits fit, but for nproc: podman lowers its own to the kernel's pid_max
    # (seen here: a hard limit of 96369 became 32768 in the service), and a container cannot have more.
    ulimits = []
    nofile = _hard_limit(resource.RLIMIT_NOFILE)
    if nofile is not None:
        ulimits.append(f"nofile={nofile}:{nofile}")
    nproc = _hard_limit(resource.RLIMIT_NPROC)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text(encoding="utf-8"))
    nproc = pid_max if nproc is None else min(nproc, pid_max)
    ulimits.append(f"nproc={nproc}:{nproc}")
    return "\n".join(
        [
            "# Written by tests/act/engine.py: podman for the act layer, with everything in this directory.",
            "[containers]",
            f"default_ulimits = {json.dumps(ulimits)}",
            "[engine]",
            'runtime = "runc"',
            # no systemd to ask for cgroups on this VM
            'cgroup_manager = "cgroupfs"',
            'events_logger = "file"',
            f"events_logfile_path = {json.dumps(str(state_dir / 'events.log'))}",
            f"exit_command_delay = {EXIT_COMMAND_DELAY_S}",
            f"tmp_dir = {json.dumps(str(paths['run'] / 'libpod'))}",
            f"static_dir = {json.dumps(str(paths['storage'] / 'libpod'))}",
            f"volume_path = {json.dumps(str(paths['storage'] / 'volumes'))}",
            "[network]",
            f"network_config_dir = {json.dumps(str(state_dir / 'networks'))}",
            "",
        ]
    )


def write_config(state_dir: Path) -> None:
    paths = _paths(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    paths["containers_conf"].write_text(containers_conf(state_dir), encoding="utf-8")
    paths["storage_conf"].write_text(
        "[storage]\n"
        'driver = "overlay"\n'
        f"graphroot = {json.dumps(str(paths['storage']))}\n"
        f"runroot = {json.dumps(str(paths['run'] / 'storage'))}\n",
        encoding="utf-8",
    )
    # No registry to search: an image named without `localhost/` fails at once instead of trying the network.
    paths["registries_conf"].write_text("unqualified-search-registries = []\n", encoding="utf-8")


def _ping(socket_path: Path) -> bool:
    """Whether the Docker API on the socket answers GET /_ping with OK."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(5)
            client.connect(str(socket_path))
            client.sendall(b"GET /_ping HTTP/1.0\r\nHost: engine\r\n\r\n")
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
    except OSError:
        return False
    return answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n", 1)[0] and answer.endswith(b"OK")


def _service_pid(state_dir: Path) -> int | None:
    """The pid of this state directory's podman service, if it is running."""
    paths = _paths(state_dir)
    try:
        pid = int(paths["pid"].read_text(encoding="utf-8"))
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    if _program(command_line[0]) in SERVICE_PROGRAMS and f"unix://{paths['socket']}".encode() in command_line:
        return pid
    return None


def _program(argument_zero: bytes) -> str:
    return Path(argument_zero.decode(errors="replace")).name


def engine_processes(state_dir: Path, *, service: bool = True) -> list[int]:
    """The live processes (conmon, podman's cleanup, the service) whose command line names this state directory.

    Without SERVICE, the service's own processes (catatonit and podman) are left out.
    """
    marker = str(state_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # empty for a zombie, which holds nothing any more
            command_line = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        arguments = command_line.split(b"\0")
        if _program(arguments[0]) not in ("conmon", "podman", "catatonit") or marker not in command_line:
            continue
        if service or b"service" not in arguments:
            found.append(int(entry.name))
    return found


def _start_service(state_dir: Path) -> None:
    paths = _paths(state_dir)
    if _service_pid(state_dir) is not None and _ping(paths["socket"]):
        return
    _stop_service(state_dir)
    # A fresh runtime directory tells podman that the machine rebooted: it resets what it knew of running
    # containers (they died with the previous service, or with the machine).
    shutil.rmtree(paths["run"], ignore_errors=True)
    paths["socket"].unlink(missing_ok=True)
    command = ["podman", "system", "service", "--time=0", f"unix://{paths['socket']}"]
    # conmon double-forks and is left to the nearest subreaper, which reaps it when it exits; without one,
    # that is the machine's init, which may leave it a zombie for minutes. catatonit (podman recommends it)
    # is one, and passes signals on to the service.
    if shutil.which("catatonit"):
        command = ["catatonit", "--", *command]
    with paths["log"].open("ab") as log:
        service = subprocess.Popen(
            command,
            env=podman_env(state_dir),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            # its own session: a Ctrl-C meant for act or pytest must not stop the engine under them
            start_new_session=True,
        )
    paths["pid"].write_text(str(service.pid), encoding="utf-8")
    deadline = time.monotonic() + SERVICE_START_TIMEOUT_S
    while not _ping(paths["socket"]):
        if service.poll() is not None or time.monotonic() > deadline:
            service.kill()
            service.wait()
            log_tail = paths["log"].read_text(encoding="utf-8", errors="replace")[-2000:]
            raise EngineUnavailable(
                f"podman system service did not answer on {paths['socket']} within {SERVICE_START_TIMEOUT_S:.0f} s "
                f"(exit status {service.returncode}); its log ends:\n{log_tail}"
            )
        time.sleep(0.1)


def _podman(state_dir: Path, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *arguments], env=podman_env(state_dir), check=check, capture_output=True, text=True
    )


def image_key() -> str:
    """The content key of the image: everything that decides what goes into it."""
    recipe = {"suite": SUITE, "packages": IMAGE_PACKAGES, "home": IMAGE_HOME, "wheelhouse": WHEELHOUSE_MOUNT}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def debian_sources() -> list[Path]:
    """The machine's apt source files that name SUITE: the image is built from the same Debian mirrors."""
    apt = Path("/etc/apt")
    candidates = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]
    candidates += sorted((apt / "sources.list.d").glob("*.sources"))
    found = [path for path in candidates if path.is_file() and SUITE in path.read_text(encoding="utf-8")]
    if not found:
        raise EngineUnavailable(
            f"no apt source under {apt} names {SUITE}: mmdebstrap has nothing to build the image from"
        )
    return found


@dataclass(frozen=True)
class ImagePython:
    """What pip needs to know of the image's interpreter to download wheels for it."""

    version: str  # 3.11
    glibc: str  # 2.36
    machine: str  # x86_64


def _image_id(state_dir: Path, label: str) -> tuple[str, str] | None:
    """The image's ID and the value of one of its labels, or None where there is no image."""
    inspected = _podman(
        state_dir,
        "image",
        "inspect",
        "--format",
        f'{{{{.Id}}}} {{{{index .Config.Labels "{label}"}}}}',
        IMAGE,
        check=False,
    )
    if inspected.returncode != 0:
        return None
    image_id, _, value = inspected.stdout.strip().partition(" ")
    return image_id, value


def _build_image(state_dir: Path) -> ImagePython:
    """Build the job image with mmdebstrap and import it, unless an image with the same content key is there."""
    key = image_key()
    facts_file = state_dir / "image.json"
    present = _image_id(state_dir, KEY_LABEL)
    if present is not None and present[1] == key and facts_file.is_file():
        facts = json.loads(facts_file.read_text(encoding="utf-8"))
        if facts.pop("image_id") == present[0]:
            return ImagePython(**facts)
    # What the wheelhouse needs to know of the image's Python, asked in the chroot while it is built: a
    # container started for it would leave its conmon to the machine's init.
    probe_file = state_dir / "image-python.txt"
    probe = "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.libc_ver()[1], platform.machine())"
    hooks = [
        f'mkdir -p "$1{IMAGE_HOME}" "$1{WHEELHOUSE_MOUNT}"',
        f'chroot "$1" python3 -c {shlex.quote(probe)} > {shlex.quote(str(probe_file))}',
    ]
    build_log = (state_dir / "image-build.log").open("wb")
    build = subprocess.Popen(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            f"--include={','.join(IMAGE_PACKAGES)}",
            *(f"--customize-hook={hook}" for hook in hooks),
            "--format=tar",
            SUITE,
            "-",
            *map(str, debian_sources()),
        ],
        stdout=subprocess.PIPE,
        stderr=build_log,
    )
    changes = [
        'CMD ["/bin/bash"]',
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        f"ENV HOME={IMAGE_HOME}",
        f"LABEL {KEY_LABEL}={key}",
    ]
    imported = subprocess.run(
        ["podman", "import", "--quiet", *(f"--change={change}" for change in changes), "-", IMAGE],
        stdin=build.stdout,
        env=podman_env(state_dir),
        capture_output=True,
        text=True,
    )
    assert build.stdout is not None
    build.stdout.close()
    build.wait()
    build_log.close()
    if build.returncode != 0:
        build_errors = (state_dir / "image-build.log").read_text(encoding="utf-8", errors="replace")
        raise EngineUnavailable(
            f"mmdebstrap could not build the image (exit status {build.returncode}):\n{build_errors[-2000:]}"
        )
    if imported.returncode != 0:
        raise EngineUnavailable(f"podman import failed (exit status {imported.returncode}):\n{imported.stderr[-2000:]}")
    # the image this one replaces, now untagged
    _podman(state_dir, "image", "prune", "--force", check=False)
    version, glibc, machine = probe_file.read_text(encoding="utf-8").split()
    built = _image_id(state_dir, KEY_LABEL)
    assert built is not None
    facts = {"version": version, "glibc": glibc, "machine": machine}
    facts_file.write_text(json.dumps({"image_id": built[0], **facts}), encoding="utf-8")
    return ImagePython(**facts)


def _harness_requirements() -> list[str]:
    """What pip needs to install the harness from its source tree: its dependencies and its build backend."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return [*project["build-system"]["requires"], *project["project"]["dependencies"]]


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _build_wheelhouse(state_dir: Path, image_python: ImagePython) -> Path:
    """A PEP 503 index (simple/NAME/index.html) of the wheels the harness needs in the image's Python."""
    python_version, glibc, machine = image_python.version, image_python.glibc, image_python.machine
    requirements = _harness_requirements()
    key = hashlib.sha256(json.dumps([python_version, glibc, machine, requirements]).encode()).hexdigest()[:16]
    wheelhouse = _paths(state_dir)["wheelhouse"]
    if (wheelhouse / "key").is_file() and (wheelhouse / "key").read_text(encoding="utf-8") == key:
        return wheelhouse
    shutil.rmtree(wheelhouse, ignore_errors=True)
    downloads = wheelhouse / "downloads"
    # pip resolves for the image's interpreter, not this one. Given --platform, pip takes wheels of exactly
    # those tags, so every manylinux tag that the image's glibc can load is named.
    major, minor = (int(part) for part in glibc.split(".")[:2])
    platforms = [f"--platform=manylinux_{major}_{older}_{machine}" for older in range(minor, 4, -1)]
    platforms += [f"--platform=manylinux{legacy}_{machine}" for legacy in ("2014", "2010", "1")]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(downloads),
         "--only-binary=:all:", "--implementation=cp", f"--python-version={python_version}",
         *platforms, *requirements],
        check=True,
    )  # fmt: skip
    for wheel in sorted(downloads.glob("*.whl")):
        project_dir = wheelhouse / "simple" / _normalized(wheel.name.split("-", 1)[0])
        project_dir.mkdir(parents=True, exist_ok=True)
        wheel.rename(project_dir / wheel.name)
    for project_dir in sorted((wheelhouse / "simple").iterdir()):
        links = "".join(f'<a href="{wheel.name}">{wheel.name}</a><br>\n' for wheel in sorted(project_dir.glob("*.whl")))
        (project_dir / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n", encoding="utf-8"
        )
    shutil.rmtree(downloads)
    (wheelhouse / "key").write_text(key, encoding="utf-8")
    return wheelhouse


def start(state_dir: Path | None = None) -> Engine:
    """Configure podman, start its API service, build the image and the wheelhouse; reuse what is there."""
    state_dir = (state_dir or default_state_dir()).resolve()
    check()
    state_dir.mkdir(parents=True, exist_ok=True)
    with _locked(state_dir):
        write_config(state_dir)
        _start_service(state_dir)
        wheelhouse = _build_wheelhouse(state_dir, _build_image(state_dir))
    return Engine(
        state_dir=state_dir,
        docker_host=f"unix://{_paths(state_dir)['socket']}",
        image=IMAGE,
        wheelhouse=wheelhouse,
        container_options=f"--volume {wheelhouse}:{WHEELHOUSE_MOUNT}:ro",
        index_url=f"file://{WHEELHOUSE_MOUNT}/simple",
    )


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    """One start or stop at a time in a state directory: two would start two services on one storage."""
    with (state_dir / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _end(pids: Iterable[int], how: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, how)


def _wait_gone(state_dir: Path, timeout_s: float, service: bool = True) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := engine_processes(state_dir, service=service)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _stop_service(state_dir: Path) -> None:
    pid = _service_pid(state_dir)
    if pid is not None:
        _end([pid], signal.SIGTERM)
        deadline = time.monotonic() + SERVICE_STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            # reaped here when this process started it, so that it leaves no zombie while this one lives
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    break
            if _service_pid(state_dir) != pid:
                break
            time.sleep(0.1)
        else:
            _end([pid], signal.SIGKILL)
    _paths(state_dir)["pid"].unlink(missing_ok=True)


def stop(state_dir: Path | None = None) -> None:
    """Remove every container (act leaves a failed job's unless --rm), stop the service, wait out conmon."""
    state_dir = (state_dir or default_state_dir()).resolve()
    if not _paths(state_dir)["containers_conf"].is_file() or shutil.which("podman") is None:
        return
    with _locked(state_dir):
        _podman(state_dir, "rm", "--force", "--all", "--time=0", check=False)
        # conmon and podman's cleanup processes end EXIT_COMMAND_DELAY_S after their container, reaped by the
        # service's catatonit while it runs; those still there well after that are stuck, and ours (their
        # command line names our storage): ended by pid.
        left = _wait_gone(state_dir, EXIT_COMMAND_DELAY_S + 10, service=False)
        _end(left, signal.SIGKILL)
        _stop_service(state_dir)
        # a service that lost its pid file (two starts at once, before the lock) is ours all the same
        _end(_wait_gone(state_dir, 1), signal.SIGTERM)
        _end(_wait_gone(state_dir, SERVICE_STOP_TIMEOUT_S), signal.SIGKILL)
        left = _wait_gone(state_dir, 5)
    if left:
        raise RuntimeError(f"processes of the engine in {state_dir} would not end: {left}")


def main(arguments: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("command", choices=["check", "install", "start", "stop"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="default: $GUIDE_GUARD_ACT_STATE, else ~/.cache/guide-guard/act-engine",
    )
    options = parser.parse_args(arguments)
    try:
        if options.command == "check":
            check()
            print("the act layer's container engine can run here")
        elif options.command == "install":
            install()
            check()
        elif options.command == "start":
            engine = start(options.state_dir)
            print(f"DOCKER_HOST={engine.docker_host}")
            print(f"IMAGE={engine.image}")
            print(f"CONTAINER_OPTIONS={engine.container_options}")
            print(f"INDEX_URL={engine.index_url}")
        else:
            stop(options.state_dir)
    except EngineUnavailable as unavailable:
        print(f"no container engine: {unavailable}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
