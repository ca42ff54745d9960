"""The rehearsal's sandbox: the simulated image, fake tools, the stand-in SpecForge repository, and ci.run's environment."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from ci import make_temporary_outputs
from ci.cli import find_tool
from ci.rehearsal.catalogue import simulations
from ci.rehearsal.interpreter import make_python
from ci.rehearsal.model import (
    ASSETS,
    BREAK_ENV,
    GUIDE_PORTS,
    KNOBS,
    MALFORMED_COMPANION_KNOB,
    SANDBOX_ENV,
    SYSTEM_PYTHON_KNOB,
    UPSTREAM_TAG,
    UPSTREAM_URL,
    Override,
    Rehearsal,
    Sandbox,
    SetupError,
    Simulation,
    run_checked,
)
from ci.rehearsal.namespaces import isolate, redirect_scratch
from ci.rehearsal.parts import REQUIRE_ENV, Parts, choose_parts
from ci.rehearsal.real import use_real_parts
from ci.rehearsal.resumed import BUILT_FILE, POINTER_FILE, SANDBOX_MARKER, Earlier, built_facts, pointer

__all__ = ["FAKE_TOOLS", "check_machine", "prepare", "reuse", "set_up"]

# Guide variables the rehearsal sets unless the caller already has: (value, why).
GUIDE_DEFAULTS = {"SPECFORGE_TRAIN_LIVENESS_WAIT": ("3", "the stand-in trainer needs about a second, not 30 s")}
FAKE_TOOLS = ("uv", "apt-get", "npu-smi", "pkill")
_FIXED_GIT_DATE = "2026-01-01T00:00:00+0000"  # the stand-in's commit hash is the same on every run


def set_up(
    output_dir: str | None,
    *,
    ref_kind: str,
    scratch: list[str],
    mode: str,
    wheelhouse: str | None,
    earlier: Earlier | None = None,
) -> Rehearsal:
    """Isolate this process, check the machine and prepare the sandbox under output_dir, or else under a new
    temporary directory in $TMPDIR/guide-guard/ (ci.make_temporary_outputs: kept, so that every path printed stays good, and
    pruned with the temporary outputs of runs). With EARLIER (--resume), reuse its sandbox as it was left
    instead: output_dir then gets ci.run's record and the report only.

    mode is "simulated" or "real" (ci/rehearsal/parts.py). Raises SetupError, also when a real part cannot be
    had and GUIDE_GUARD_REQUIRE_EXTERNAL=1; a temporary directory made is kept, as the paths its message may name.
    """
    shared = isolate()
    check_machine()
    parts = choose_parts(mode, wheelhouse, isolated=shared is None)
    if parts.fallbacks and os.environ.get(REQUIRE_ENV) == "1":
        reasons = "; ".join(f"{part.name}: {part.how}" for part in parts.fallbacks)
        raise SetupError(f"--real with {REQUIRE_ENV}=1, and a real part cannot be had here ({reasons})")
    if output_dir is not None:
        root = Path(output_dir).absolute()
    else:
        try:
            made = make_temporary_outputs("rehearsal")
        except OSError as exc:
            raise SetupError(
                f"cannot make a temporary directory ({exc.strerror or exc}): name one with --output-dir"
            ) from exc
        for warning in made.warnings:
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        root = made.path
    if earlier is None:
        plan = prepare(root, ref_kind=ref_kind, shared=shared, scratch=scratch, parts=parts)
    else:
        plan = reuse(root, earlier, ref_kind=ref_kind, shared=shared, scratch=scratch, parts=parts)
    if shared is None:
        redirect_scratch(scratch, plan.sandbox.base / "guide-tmp")
    return plan


def check_machine() -> None:
    """What the rehearsal itself needs: the simulations' modules, bash, git, and the guide's ports free on 127.0.0.1."""
    missing = missing_modules()
    if missing:
        raise SetupError(
            f"the simulations need {', '.join(missing)}, which this Python does not have: pip install "
            "'guide-guard[rehearsal]' (in a checkout: pip install -e '.[rehearsal]')"
        )
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


def missing_modules() -> list[str]:
    """What the simulations import from the harness's environment and it does not have: the `rehearsal` extra's
    (pyproject.toml), which the harness itself does not need."""
    missing = [] if importlib.util.find_spec("click") else ["click (the stand-in SpecForge's CLI)"]
    # the stand-ins' build backend reads pyproject.toml with tomllib, else tomli, else pip's own copy of tomli
    if sys.version_info < (3, 11) and not (importlib.util.find_spec("tomli") or importlib.util.find_spec("pip")):
        missing.append("tomli (the stand-in projects' build backend on Python 3.10)")
    return missing


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)


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
    run_checked(["git", "init", "-q", str(workspace)], env=_git_env())
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


def malformed(patch: str) -> str:
    """The patch with its last hunk claiming three lines more than it has, as upstream's companion patch was once
    malformed against the base patch it follows (issue 37): `git apply` refuses it as a corrupt patch."""
    last = list(re.finditer(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", patch, re.M))[-1]
    header = f"@@ -{last[1]},{int(last[2]) + 3} +{last[3]},{int(last[4]) + 3} @@"
    return patch[: last.start()] + header + patch[last.end() :]


def make_upstream(sandbox: Sandbox) -> tuple[str, Path]:
    """The local SpecForge repository (bare, tagged) and the git config that points the guide's URL at it."""
    source = sandbox.base / "git" / "specforge-src"
    _copy_tree(ASSETS / "specforge-repo", source)
    if os.environ.get(BREAK_ENV) == "ascend-patch-missing":  # an older checkout, from before the companion patch
        for companion in source.glob("patches/sglang/*/spec-capture-ascend-mount.patch"):
            companion.unlink()
    if os.environ.get(BREAK_ENV) == MALFORMED_COMPANION_KNOB:
        for companion in source.glob("patches/sglang/*/spec-capture-ascend-mount.patch"):
            companion.write_text(malformed(companion.read_text(encoding="utf-8")), encoding="utf-8")
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
    run_checked(["git", "init", "-q", "-b", "main", str(source)], env=env)
    run_checked(["git", "-C", str(source), "add", "-A"], env=env)
    run_checked(["git", "-C", str(source), "commit", "-q", "-m", "[simulation] SpecForge stand-in"], env=env)
    run_checked(["git", "-C", str(source), "tag", UPSTREAM_TAG], env=env)
    run_checked(["git", "clone", "-q", "--bare", str(source), str(sandbox.bare_repo)], env=env)
    # the guide's commit path fetches one commit by hash
    run_checked(["git", "-C", str(sandbox.bare_repo), "config", "uploadpack.allowAnySHA1InWant", "true"], env=env)
    commit = run_checked(["git", "-C", str(source), "rev-parse", "HEAD"], env=env).strip()
    gitconfig = sandbox.base / "gitconfig"
    gitconfig.write_text(
        "# [simulation] guide-guard rehearsal: the guide's SpecForge URL is this local repository.\n"
        f'[url "{sandbox.bare_repo.as_uri()}"]\n\tinsteadOf = {UPSTREAM_URL}\n',
        encoding="utf-8",
    )
    return commit, gitconfig


def prepare(root: Path, *, ref_kind: str, shared: str | None, scratch: list[str], parts: Parts) -> Rehearsal:
    """Build the sandbox under root and the environment ci.run gets; nothing is started yet."""
    system_python = os.environ.get(BREAK_ENV) == SYSTEM_PYTHON_KNOB
    sandbox = Sandbox(root=root, base=root / "sandbox", system_python=system_python)
    if sandbox.base.exists():
        if not (sandbox.base / SANDBOX_MARKER).exists():
            raise SetupError(f"{sandbox.base} exists and is not a rehearsal sandbox")
        shutil.rmtree(sandbox.base)
    for directory in (sandbox.bin, sandbox.workdir, sandbox.base / "home", sandbox.base / "tmp"):
        directory.mkdir(parents=True, exist_ok=True)
    (sandbox.base / SANDBOX_MARKER).write_text("a rehearsal sandbox; safe to delete\n", encoding="utf-8")
    (sandbox.base / BUILT_FILE).write_text(built_facts(parts.mode, os.environ.get(BREAK_ENV, "")), encoding="utf-8")
    python = make_python(sandbox)
    tools = install_fake_tools(sandbox, python)
    make_image(sandbox)
    commit, gitconfig = make_upstream(sandbox)

    plan = Rehearsal(sandbox=sandbox, env=_inherited_env(), shared=shared, scratch=scratch, parts=parts)
    _environment(plan, ref_kind=ref_kind, commit=commit, gitconfig=gitconfig)
    use_real_parts(plan, parts)
    if "curl" in tools:
        plan.simulations.append(_FAKE_CURL)
    return plan


def reuse(
    root: Path, earlier: Earlier, *, ref_kind: str, shared: str | None, scratch: list[str], parts: Parts
) -> Rehearsal:
    """The environment ci.run gets in EARLIER's sandbox, as that rehearsal left it (nothing built, nothing wiped);
    ci.run's record goes to root. Only --simulated sandboxes are reused (resumed.find_earlier)."""
    sandbox = Sandbox(root=root, base=earlier.base, system_python=earlier.system_python)
    tag = f"{UPSTREAM_TAG}^{{commit}}"
    commit = run_checked(["git", "-C", str(sandbox.bare_repo), "rev-parse", tag], env=_git_env()).strip()
    calls_from = sandbox.calls.stat().st_size if sandbox.calls.exists() else 0
    root.mkdir(parents=True, exist_ok=True)
    (root / POINTER_FILE).write_text(pointer(earlier), encoding="utf-8")  # so that this rehearsal can be resumed
    plan = Rehearsal(
        sandbox=sandbox,
        env=_inherited_env(),
        shared=shared,
        scratch=scratch,
        parts=parts,
        resumed=earlier.root,
        calls_from=calls_from,
    )
    _environment(plan, ref_kind=ref_kind, commit=commit, gitconfig=sandbox.base / "gitconfig")
    if (sandbox.bin / "curl").exists():
        plan.simulations.append(_FAKE_CURL)
    return plan


_FAKE_CURL = Simulation("curl", "curl", "fake: this machine has no curl")


def _environment(plan: Rehearsal, *, ref_kind: str, commit: str, gitconfig: Path) -> None:
    """ci.run's environment for the sandbox, and the simulations the report lists (but the real parts')."""
    _override_machine(plan)
    plan.override("GIT_CONFIG_GLOBAL", str(gitconfig), f"url.insteadOf sends {UPSTREAM_URL} to the local repository")
    plan.override("GIT_CONFIG_NOSYSTEM", "1", "the machine's git config cannot redirect the clone elsewhere")
    upstream_ref = commit if ref_kind == "commit" else UPSTREAM_TAG
    why = "the stand-in's release tag" if ref_kind == "tag" else f"the commit of the stand-in's {UPSTREAM_TAG}"
    plan.override("UPSTREAM_REF", upstream_ref, why)
    _override_guide(plan)
    plan.simulations += simulations(plan.sandbox, plan.parts)


def _inherited_env() -> dict[str, str]:
    """The caller's environment without what would reach past the sandbox (Python, Hub, git, pip, uv settings)."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "UPSTREAM_REF", BREAK_ENV)
    return {
        name: value
        for name, value in os.environ.items()
        if name not in dropped and not name.startswith(("HF_", "HUGGING_FACE_", "GIT_", "PIP_", "UV_"))
    }


def _override_machine(plan: Rehearsal) -> None:
    """The sandbox's tools, interpreter, home and temporary directory instead of the machine's."""
    sandbox = plan.sandbox
    path = f"{sandbox.bin}:{sandbox.python_env / 'bin'}:{os.environ.get('PATH', os.defpath)}"
    plan.override("PATH", path, "fake tools first")
    if sandbox.system_python:
        plan.overrides.append(Override("VIRTUAL_ENV", "(unset)", "the image's Python is a system one: no virtualenv"))
    else:
        plan.override("VIRTUAL_ENV", str(sandbox.python_env), "`uv pip install` installs into the sandbox's venv")
    plan.env["REHEARSAL_ISOLATION"] = (
        "shared" if plan.shared else "private"
    )  # the stand-ins bind 0.0.0.0 only if private
    plan.override("HOME", str(sandbox.base / "home"), "no tool writes to the real home directory")
    plan.override("TMPDIR", str(sandbox.base / "tmp"), "temporary files of pip and Python stay in the sandbox")
    plan.override("PYTHONDONTWRITEBYTECODE", "1", "no bytecode written anywhere; existing caches are still read")
    plan.override(SANDBOX_ENV, str(sandbox.base), "simulations record their calls here")
    plan.override("REHEARSAL_INDEX", str(sandbox.base / "index"), "the fake uv's simulated package index")
    plan.env["REHEARSAL_PY_SPY"] = find_tool("py-spy") or ""


def _override_guide(plan: Rehearsal) -> None:
    """The Hub cache, proxies, CANN's root and the guide's own variables; the caller's SPECFORGE_* are listed."""
    plan.override("HF_HOME", str(plan.sandbox.base / "hf-home"), "the model cache lives in the sandbox")
    plan.override("HF_HUB_DISABLE_TELEMETRY", "1", "nothing leaves the machine")
    no_proxy = ",".join(filter(None, ["127.0.0.1", "localhost", os.environ.get("NO_PROXY", "")]))
    plan.override("NO_PROXY", no_proxy, "loopback traffic never goes through a proxy")
    plan.env["no_proxy"] = no_proxy
    plan.override(
        "SPECFORGE_ASCEND_ROOT",
        str(plan.sandbox.ascend_root),
        "for /usr/local/Ascend: check-cann's install info, smoke-start-sglang's ATB lib dir",
    )
    for name, (value, why) in GUIDE_DEFAULTS.items():
        if name not in plan.env:
            plan.override(name, value, why)
    for name in sorted(os.environ):
        if name.startswith("SPECFORGE_") and name not in plan.env.keys() - os.environ.keys():
            plan.overrides.append(Override(name, os.environ[name], "from the caller's environment"))
    knob = os.environ.get(BREAK_ENV, "")
    if knob:
        plan.override(BREAK_ENV, knob, KNOBS[knob])
