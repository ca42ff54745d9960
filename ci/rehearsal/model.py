"""What a rehearsal is made of: its sandbox's layout, the failure knobs, and what its report lists."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci.rehearsal.parts import Parts

__all__ = [
    "ASSETS",
    "BREAK_ENV",
    "GUIDE_PORTS",
    "KNOBS",
    "MALFORMED_COMPANION_KNOB",
    "MOONCAKE_PORTS",
    "SANDBOX_ENV",
    "SHARED_ENV",
    "SYSTEM_PYTHON_KNOB",
    "UPSTREAM_TAG",
    "UPSTREAM_URL",
    "Override",
    "Rehearsal",
    "Sandbox",
    "SetupError",
    "Simulation",
    "run_checked",
]

# The simulations, data beside this module (ci/rehearsal/simulations/): package data, in a checkout and a wheel alike.
ASSETS = Path(__file__).resolve().parent / "simulations"
SANDBOX_ENV = "REHEARSAL_SANDBOX"  # every simulation finds the sandbox (and its call log) through it
BREAK_ENV = "REHEARSAL_BREAK"  # the failure knob the simulations obey
SHARED_ENV = "REHEARSAL_SHARED"  # set to 1: no private namespaces, the machine's loopback and /tmp
SYSTEM_PYTHON_KNOB = "uv-no-venv"  # the knob that gives the guide a system Python instead of a virtualenv
MALFORMED_COMPANION_KNOB = "companion-patch-malformed"  # the SpecForge repository serves upstream's malformed form

# REHEARSAL_BREAK values: which simulation misbehaves, and which block should then report it.
KNOBS = {
    "mooncake-no-bind": "mooncake_master never binds its RPC port: smoke-start-mooncake fails after its 30 s wait",
    "mooncake-stale-master": "a mooncake_master of a previous run holds the guide's ports: smoke-start-mooncake stops it",
    "uv-no-venv": "the image's Python is a system one with no virtualenv active: a bare `uv pip install` refuses",
    "ascend-patch-missing": "the SpecForge checkout has no Ascend companion patch: smoke-train-launch fails at the first capture",
    "companion-patch-malformed": "the Ascend companion patch is corrupt (git apply: corrupt patch): the guide's anchored edits "
    "make its change and the run passes",
    "patch-script-silent-skip": "the apply script says applied and patches nothing: smoke-apply-patches names the files",
    "store-polluted": "the download client prints progress on stdout beside the path: the guide stores the path alone",
    "net-stall": "the Hub accepts the model's download and sends nothing: smoke-download-model fails at its stall bound",
    "cuda-wheel": "the index serves a CUDA build of Mooncake (libcuda.so.1): build-mooncake's load check quotes the loader",
    "apt-missing-lib": "libibverbs is absent (libibverbs.so.1): build-mooncake's load check quotes the loader",
    "specforge-missing-dep": "specforge train needs a module --no-deps did not install: specforge-install-source names it",
    "sglang-never-healthy": "SGLang answers /health with 503 for ever: smoke-start-sglang fails at its deadline",
    "sglang-dies-starting": "the SGLang server exits during start-up: smoke-start-sglang fails at once with its last words",
    "trainer-dies": "specforge train fails at start: smoke-train-launch reports it died within the liveness wait",
    "trainer-zombie": "the trainer's process stays in state Z: smoke-train-monitor takes it as exited and passes",
    "trainer-no-step": "the trainer never logs a step/loss line: smoke-train-monitor fails at SPECFORGE_TRAIN_TIMEOUT",
    "trainer-hang": "the trainer hangs after its step line: smoke-train-monitor's teardown path dumps [ERROR] diagnostics",
}

UPSTREAM_URL = "https://github.com/sgl-project/SpecForge.git"  # what the guide clones
UPSTREAM_TAG = "v0.0.0-rehearsal"  # the release tag of the local stand-in repository
# The guide's default ports, all on 127.0.0.1: its expected output names 35551, and the recipe the
# trainer reads names 30000, so the rehearsal keeps the defaults rather than moving them.
MOONCAKE_PORTS = {"rpc_port": 35551, "http_metadata_server_port": 35880, "metrics_port": 35903}
GUIDE_PORTS = {
    30000: "SGLang capture server",
    MOONCAKE_PORTS["rpc_port"]: "mooncake_master RPC",
    MOONCAKE_PORTS["http_metadata_server_port"]: "mooncake HTTP metadata",
    MOONCAKE_PORTS["metrics_port"]: "mooncake_master metrics (bound even with metric reporting off)",
}


@dataclass(frozen=True)
class Sandbox:
    """Where one rehearsal keeps everything it builds; nothing outside it is written (but the guide's /tmp logs)."""

    root: Path  # --output-dir, or a temporary directory: ci.run's results.json and blocks/ go here too
    base: Path  # root/sandbox: the simulation's files (a resumed rehearsal's: the earlier one's sandbox)
    system_python: bool = False  # the image's Python is a system one, not a virtualenv (REHEARSAL_BREAK=uv-no-venv)

    @property
    def bin(self) -> Path:
        return self.base / "bin"  # fake tools and the `python` shim, first on PATH

    @property
    def python_env(self) -> Path:
        """The image's Python environment, where `uv pip install` puts packages (mooncake, specforge, ...)."""
        return self.base / ("system-python" if self.system_python else "venv")

    @property
    def wheels(self) -> Path:
        return self.base / "wheels"  # what the real uv installs from: the stand-ins' wheels and the wheelhouse's

    @property
    def cann_runtime(self) -> Path:
        return self.ascend_root / "ascend-toolkit" / "latest" / "lib64"  # CANN's runtime libraries (stand-ins)

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
    invented: str = ""  # behaviour written from the guide, not read from the real package: failures it cannot catch


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
    env: dict[str, str]  # the whole environment ci.run gets
    shared: str | None  # why the machine's loopback and /tmp are shared; None: private namespaces
    scratch: list[str]  # the guide's own /tmp files (redirected into the sandbox unless shared)
    parts: Parts  # uv and Mooncake: real or stand-ins, and why
    simulations: list[Simulation] = field(default_factory=list)
    overrides: list[Override] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the rehearsal itself set up and what became of it
    resumed: Path | None = None  # --resume: the earlier rehearsal's output directory, whose sandbox this one reuses
    calls_from: int = 0  # where this rehearsal's calls begin in calls.jsonl (a resumed one's follow the earlier's)

    @property
    def own_files(self) -> Path:
        """Where the report and the fake Hub's log go: the sandbox, or a resumed rehearsal's output directory."""
        return self.sandbox.base if self.resumed is None else self.sandbox.root

    def override(self, name: str, value: str, why: str) -> None:
        self.env[name] = value
        self.overrides.append(Override(name, value, why))


class SetupError(Exception):
    """The rehearsal cannot be prepared on this machine (a port is taken, git is missing, ...)."""


def run_checked(argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """A set-up command's stdout; SetupError with its stderr when it fails."""
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SetupError(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.stdout
