"""The package's shape: imports go one way through the stages, with no cycle; modules and functions stay small."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CI = Path(__file__).resolve().parents[1] / "ci"

# Lowest first: a module may import from its own layer or a lower one, never a higher one.
LAYERS = ("core", "runner", "report", "maintain", "commands")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def layer_of(module: str) -> str:
    """The stage a module of the `ci` package belongs to."""
    parts = module.split(".")
    if module == "ci" or parts[1:2] == ["core"]:
        return "core"
    if parts[1:2] == ["runner"]:
        return "runner"
    if parts[1:2] in (["report"], ["record"]):
        return "report"
    if parts[1:2] == ["maintain"]:
        return "maintain"
    return "commands"  # ci.run, ci.rehearse, ci.monitor, ci.drift, ci.cli, ci.__main__, ci.rehearsal


@dataclass(frozen=True)
class Arrow:
    """One import of a ci module by another, wherever it is written (a function's body included)."""

    importer: str
    imported: str
    line: int


def _module_name(path: Path, root: Path) -> str:
    relative = path.relative_to(root.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def harness_modules(root: Path) -> Iterator[tuple[str, Path]]:
    """Every Python module of the harness: the rehearsal's simulations (data copied into a sandbox) are not."""
    for path in sorted(root.rglob("*.py")):
        inside = path.relative_to(root).parts
        if inside[0] == "rehearsal" and not (root / "rehearsal" / "__init__.py").exists():
            continue  # only asset folders: none of it is the harness's code
        if inside[0] == "rehearsal" and (len(inside) > 2 or inside[1] == "build_backend.py"):
            continue  # the simulations: its asset folders, and the build backend of its stand-in packages
        yield _module_name(path, root), path


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def arrows(root: Path) -> list[Arrow]:
    """Every import between modules of the package, module-level and function-level alike."""
    known = {name for name, _ in harness_modules(root)}
    found = []
    for name, path in harness_modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = _resolve(name, path.name == "__init__.py", node)
                # `from ci.core import model` imports the module ci.core.model
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
            for target in targets:
                if target == "ci" or target.startswith("ci."):
                    while target not in known and "." in target:
                        target = target.rsplit(".", 1)[0]
                    if target != name:
                        found.append(Arrow(name, target, node.lineno))
    return found


def against_the_stages(found: list[Arrow]) -> list[str]:
    return [
        f"{a.importer} (line {a.line}, {layer_of(a.importer)}) imports {a.imported} ({layer_of(a.imported)})"
        for a in found
        if LAYERS.index(layer_of(a.imported)) > LAYERS.index(layer_of(a.importer))
    ]


def cycles(found: list[Arrow]) -> list[list[str]]:
    """The import cycles, each as the modules around it (depth-first search over every arrow)."""
    graph: dict[str, set[str]] = {}
    for arrow in found:
        graph.setdefault(arrow.importer, set()).add(arrow.imported)
    seen: set[str] = set()
    found_cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target in path:
                found_cycles.append([*path[path.index(target) :], target])
            elif target not in seen:
                seen.add(target)
                visit(target, [*path, target])

    for start in sorted(graph):
        if start not in seen:
            seen.add(start)
            visit(start, [start])
    return found_cycles


def oversized(root: Path) -> list[str]:
    """Modules over MAX_MODULE_LINES lines and functions over MAX_FUNCTION_LINES, with where they are."""
    found = []
    for _, path in harness_modules(root):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root.parent)}: {lines} lines (module limit {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno}: {node.name} is {length} lines"
                        f" (function limit {MAX_FUNCTION_LINES})"
                    )
    return found


def test_imports_go_one_way_through_the_stages() -> None:
    found = arrows(CI)
    assert found, "no imports found: the walk is broken"
    assert against_the_stages(found) == []


def test_no_module_imports_itself_back() -> None:
    assert cycles(arrows(CI)) == []


def test_modules_and_functions_stay_small() -> None:
    assert oversized(CI) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "ci" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "ci"


@pytest.mark.parametrize("where", ["top", "function"])
def test_the_rules_catch_an_arrow_against_the_stages_and_a_cycle(tmp_path: Path, where: str) -> None:
    upward = "from ci.runner.execute import run_guide\n"
    if where == "function":
        upward = "def later() -> None:\n    from ci.runner.execute import run_guide\n"
    root = _write(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/plan.py": upward,
            "runner/__init__.py": "",
            "runner/execute.py": "from ci.runner import process\n",
            "runner/process.py": "from . import execute\n",
        },
    )
    found = arrows(root)
    assert against_the_stages(found) == [
        f"ci.core.plan (line {1 if where == 'top' else 2}, core) imports ci.runner.execute (runner)"
    ]
    assert ["ci.runner.execute", "ci.runner.process", "ci.runner.execute"] in cycles(found)


def test_the_rules_catch_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "".join(f"    x = {n}\n" for n in range(MAX_FUNCTION_LINES))
    root = _write(tmp_path, {"__init__.py": "", "big.py": "def f() -> None:\n" + body + "\n" * MAX_MODULE_LINES})
    assert oversized(root) == [
        f"ci/big.py: {MAX_MODULE_LINES + MAX_FUNCTION_LINES + 1} lines (module limit {MAX_MODULE_LINES})",
        f"ci/big.py:1: f is {MAX_FUNCTION_LINES + 1} lines (function limit {MAX_FUNCTION_LINES})",
    ]
