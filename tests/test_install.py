"""The package installs whole: a wheel in a new virtual environment rehearses from anywhere, and its commands answer.

The wheel is built from a copy of the checkout (so that no build/ directory of an earlier build can slip
files into it) with this environment's setuptools, and installed without its dependencies into a new
virtual environment. The dependencies are the ones this test environment installed from the same
pyproject.toml: a path file makes them importable there, so the suite downloads nothing a second time
(the `rehearsal` extra's among them: the `test` extra holds them too).
A path file's own path files are not read, so this environment's editable `ci` stays out of sight;
the tests check that the `ci` they run is the installed one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import ci

# The rehearsal binds the guide's own fixed ports: under pytest-xdist these tests share one worker.
pytestmark = pytest.mark.xdist_group("guide-ports")

REPO = Path(__file__).resolve().parents[1]
# Top-level entries of a checkout that are not the project: what git ignores, and git itself.
NOT_SOURCE = {".git", ".venv", "build", "dist", "out", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".ci-venv"}
COMMANDS = [
    *["guide-guard", "guide-guard-rehearse", "guide-guard-monitor", "guide-guard-drift", "guide-guard-registry"],
    *["guide-guard-pre-commit", "guide-guard-job", "guide-guard-secrets", "guide-guard-runner-service"],
    "guide-guard-release",
]


@dataclass(frozen=True)
class Installed:
    """A new virtual environment holding the wheel, and a directory outside the checkout to work in."""

    wheel: Path
    venv: Path
    elsewhere: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def run(
        self, *argv: str, env: dict[str, str] | None = None, timeout_s: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run argv in the directory outside the checkout, with the environment's commands first on PATH.

        This test environment's scripts come last on PATH: py-spy's program is one of the dependencies.
        """
        path = f"{self.bin}:{os.environ.get('PATH', os.defpath)}:{sysconfig.get_paths()['scripts']}"
        return subprocess.run(
            list(argv),
            cwd=self.elsewhere,
            env={**(env or os.environ), "PATH": path},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )


def _ignore_outside_the_project(directory: str, names: list[str]) -> set[str]:
    top = Path(directory).resolve() == REPO
    return {n for n in names if n == "__pycache__" or n.endswith(".egg-info") or (top and n in NOT_SOURCE)}


def _check(command: list[str], **options: object) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, **options)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"


# built once per worker: the guide-ports group interleaves this module with test_rehearsal.py, and a
# module-scoped fixture would be built again each time the worker comes back to it
@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("install")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=_ignore_outside_the_project)
    wheels = work / "wheels"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
    _check([*pip_wheel, str(source)])
    (wheel,) = wheels.glob("guide_guard-*.whl")
    venv = work / "venv"
    _check([sys.executable, "-m", "venv", str(venv)])
    _check([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)])
    site_packages = _site_packages(venv)
    ours = sysconfig.get_paths()
    (site_packages / "zz-test-dependencies.pth").write_text(
        "\n".join(dict.fromkeys([ours["purelib"], ours["platlib"]])) + "\n", encoding="utf-8"
    )
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    yield Installed(wheel, venv, elsewhere)


def _site_packages(venv: Path) -> Path:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def test_the_installed_package_is_the_one_that_runs(installed: Installed) -> None:
    done = installed.run("python", "-c", "import ci, ci.rehearse; print(ci.__file__); print(ci.rehearse.ASSETS)")
    package, assets = (Path(line) for line in done.stdout.splitlines())
    assert package.is_relative_to(installed.venv), done.stdout
    assert assets.is_relative_to(installed.venv) and (assets / "fakes" / "tools.py").is_file(), done.stdout


def test_the_wheel_carries_every_simulation_and_no_bytecode(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        in_wheel = {name.removeprefix("ci/rehearsal/") for name in wheel.namelist() if name.startswith("ci/rehearsal/")}
    source = REPO / "ci" / "rehearsal"
    in_source = {
        p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    assert in_wheel == in_source


def test_click_is_the_rehearsals_extra_not_a_dependency_of_the_harness(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        # the wheel's own (the simulated image's dist-info folders are package data)
        (metadata,) = [
            name for name in wheel.namelist() if re.fullmatch(r"guide_guard-[^/]+\.dist-info/METADATA", name)
        ]
        requires = [
            line for line in wheel.read(metadata).decode("utf-8").splitlines() if line.startswith("Requires-Dist:")
        ]
    click = [line for line in requires if line.split()[1].startswith("click")]
    # the harness needs no click: only its extras (rehearsal, real, test) bring it
    assert click and all("extra ==" in line for line in click), requires
    assert any('extra == "rehearsal"' in line for line in click), requires


def test_an_installed_wheel_rehearses_the_guide_from_outside_the_checkout(
    installed: Installed, harness_env: dict[str, str]
) -> None:
    guide = installed.elsewhere / "specforge.md"
    shutil.copy(REPO / "docs" / "specforge.md", guide)
    output_dir = installed.elsewhere / "rehearsal"
    done = installed.run(
        str(installed.bin / "guide-guard-rehearse"),
        guide.name,
        "--output-dir",
        str(output_dir),
        env=harness_env,
        timeout_s=240,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    record = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    statuses = {block["status"] for block in record["blocks"]}
    assert statuses == {"passed"}, statuses
    assert "simulation" in done.stdout


def test_every_command_prints_the_version(installed: Installed) -> None:
    for command in COMMANDS:
        done = installed.run(command, "--version")
        assert (done.returncode, done.stdout) == (0, f"guide-guard {ci.__version__}\n"), (command, done.stderr)
    for module in ("ci.run", "ci.report.timeline"):  # the commands run as modules
        done = installed.run("python", "-m", module, "--version")
        assert done.stdout == f"guide-guard {ci.__version__}\n", (module, done.stderr)


def test_the_usage_line_names_the_command_the_user_typed(installed: Installed) -> None:
    for command in COMMANDS:
        done = installed.run(command, "--help")
        assert done.returncode == 0 and done.stdout.startswith(f"usage: {command} "), (command, done.stdout[:200])
    typed_bare = installed.run("guide-guard")
    assert typed_bare.returncode == 2
    assert typed_bare.stderr.startswith("usage: guide-guard [-h]"), typed_bare.stderr
    assert "guide-guard: error: the following arguments are required: GUIDE" in typed_bare.stderr
    as_module = installed.run("python", "-m", "ci.run")
    assert as_module.returncode == 2 and as_module.stderr.startswith("usage: python -m ci.run [-h]"), as_module.stderr


def test_python_m_ci_run_from_the_checkout_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ci.run", "--version"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, f"guide-guard {ci.__version__}\n")


# ---------------------------------------------------------------------------------------------------------
# The README's commands are the ones CI runs


def _readme_commands() -> dict[str, str]:
    """The README's bash blocks by the paragraph that introduces them."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse((REPO / "README.md").read_text(encoding="utf-8"))
    commands: dict[str, str] = {}
    paragraph = ""
    for token in tokens:
        if token.type == "inline":
            paragraph = token.content
        elif token.type == "fence" and token.info.strip() == "bash":
            commands[paragraph] = token.content.strip()
    return commands


def test_ci_runs_the_readme_commands_as_written() -> None:
    commands = _readme_commands()
    start_here = [command for intro, command in commands.items() if intro.startswith("Start here")]
    test_suite = [command for intro, command in commands.items() if intro.startswith("Run the whole test suite")]
    assert len(start_here) == 1 and len(test_suite) == 1, commands
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    for command in (*start_here, *test_suite):
        assert "\n" not in command, f"one line, so that it can be copied: {command!r}"
        # `|| exit` after it: under `set -e` a failure inside an && list would not stop the script
        assert f"{command} || exit" in ci_lines, textwrap.indent(command, "  ")
    assert 'export GUIDE_GUARD_REQUIRE_EXTERNAL="${GUIDE_GUARD_REQUIRE_EXTERNAL:-1}"' in ci_lines
