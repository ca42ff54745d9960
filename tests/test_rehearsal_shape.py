"""The rehearsal is an application of the harness: it reaches the harness through its public API and its commands only.

Its modules (ci/rehearse.py and ci/rehearsal/*.py) may import `ci` (the names of `ci.__all__`), `ci.cli` (what
every command shares), `ci.run`'s `main` (running a command; a subprocess does as well) and one another; nothing
else of the harness. Its simulations (ci/rehearsal/simulations/) are data run in a sandbox: they import no `ci`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ci

CI = Path(__file__).resolve().parents[1] / "ci"
REHEARSAL = CI / "rehearsal"
SIMULATIONS = REHEARSAL / "simulations"
# what the rehearsal may import of the harness, beside `ci`'s public names: (module, names or None for any)
ALLOWED = {"ci.cli": None, "ci.run": {"main"}}


def rehearsal_modules() -> list[Path]:
    """The rehearsal's own code: its command line and the modules of ci/rehearsal/ (not the simulations' folder)."""
    return [CI / "rehearse.py", *sorted(REHEARSAL.glob("*.py"))]


def _own(module: str) -> bool:
    """A module of the rehearsal itself (ci.rehearse, ci.rehearsal and its modules, not the simulations)."""
    if module in ("ci.rehearse", "ci.rehearsal"):
        return True
    inside = module.removeprefix("ci.rehearsal.")
    return inside != module and "." not in inside and (REHEARSAL / f"{inside}.py").is_file()


def _imports(path: Path, package: str) -> list[tuple[int, str, list[str]]]:
    """Every import in PATH, module-level and inside functions alike: (line, module, names; [] for `import M`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from PACKAGE, one level up per dot beyond the first
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            found.append((node.lineno, module, [alias.name for alias in node.names]))
    return found


def _judge(module: str, names: list[str]) -> list[str]:
    """Why importing NAMES from MODULE (or MODULE itself, for no names) is refused: nothing when it is allowed."""
    if (module != "ci" and not module.startswith("ci.")) or _own(module):
        return []
    if module == "ci":
        private = [name for name in names if name not in ci.__all__] if names else ["(the package itself)"]
        return [f"from ci import {name}: not in ci.__all__" for name in private]
    if module not in ALLOWED:
        return [f"imports {module}, a harness internal (ci.__all__, ci.cli or ci.run.main)"]
    allowed = ALLOWED[module]
    if allowed is not None and (not names or set(names) - allowed):
        return [f"{module} {names or '(the module)'}: only {sorted(allowed)} of it"]
    return []


def refused_imports(path: Path, package: str) -> list[str]:
    """PATH's imports of the harness outside its public API, ci.cli and ci.run's main, PATH read as a module of
    PACKAGE (relative imports are resolved from there)."""
    return [
        f"{path.name}:{line}: {why}" for line, module, names in _imports(path, package) for why in _judge(module, names)
    ]


def test_the_rehearsal_reaches_the_harness_through_its_public_api_and_commands_only() -> None:
    modules = rehearsal_modules()
    assert REHEARSAL / "sandbox.py" in modules and REHEARSAL / "report.py" in modules
    refused = [why for path in modules for why in refused_imports(path, "ci" if path.parent == CI else "ci.rehearsal")]
    assert refused == []


def test_the_shape_check_refuses_an_internal_import(tmp_path: Path) -> None:
    """The walk itself: an internal at module level or in a function, a private name of `ci`, relative imports."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from ci.base.text import plural\n"
        "from ci import Status, _HOMES\n"
        "from ci.cli import find_tool\n"
        "from ci.run import main, parse\n"
        "from .model import Sandbox\n"
        "from ci.rehearsal.simulations import build_backend\n"
        "def f():\n"
        "    import ci.process.supervisor\n"
        "    from ..guide import model\n",
        encoding="utf-8",
    )
    assert refused_imports(probe, "ci.rehearsal") == [
        "probe.py:1: imports ci.base.text, a harness internal (ci.__all__, ci.cli or ci.run.main)",
        "probe.py:2: from ci import _HOMES: not in ci.__all__",
        "probe.py:4: ci.run ['main', 'parse']: only ['main'] of it",
        "probe.py:6: imports ci.rehearsal.simulations, a harness internal (ci.__all__, ci.cli or ci.run.main)",
        "probe.py:8: imports ci.process.supervisor, a harness internal (ci.__all__, ci.cli or ci.run.main)",
        "probe.py:9: imports ci.guide, a harness internal (ci.__all__, ci.cli or ci.run.main)",
    ]


@pytest.mark.parametrize("name", ci.__all__)
def test_every_public_name_is_there(name: str) -> None:
    assert getattr(ci, name) is not None


def test_the_simulations_are_data_importing_nothing_of_the_harness() -> None:
    assert (SIMULATIONS / "fakes" / "tools.py").is_file() and (SIMULATIONS / "build_backend.py").is_file()
    found = [
        f"{path.relative_to(CI.parent)}:{line}: {module}"
        for path in sorted(SIMULATIONS.rglob("*.py"))
        for line, module, _ in _imports(path, "")
        if module == "ci" or module.startswith("ci.")
    ]
    assert found == []
    # no module of the harness beside them: every folder of ci/rehearsal/ but __pycache__ is the simulations'
    assert {p.name for p in REHEARSAL.iterdir() if p.is_dir()} <= {"simulations", "__pycache__"}
