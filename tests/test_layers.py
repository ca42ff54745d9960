"""The package's shape: imports go one way through the stages, with no cycle; modules and functions stay small."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CI = Path(__file__).resolve().parents[1] / "ci"

# Lowest first: a module may import from its own layer or a lower one, never a higher one (docs/architecture.md,
# "The folders"). `ci.github.api`, the one web client, sits below `maintain`, which asks GitHub and PyPI through it.
LAYERS = (
    "base",
    "guide",
    "record",
    "expect",
    "process",
    "runner",
    "report",
    "web",
    "maintain",
    "cli",
    "github",
    "commands",
)
FOLDER_LAYERS = {
    "base": "base",
    "guide": "guide",
    "record": "record",
    "expect": "expect",
    "process": "process",
    "runner": "runner",
    "report": "report",
    "maintain": "maintain",
    "github": "github",
}
# Generous ceilings: a module is one idea whatever its length, and size is only a prompt to look.
MAX_MODULE_LINES = 900
MAX_FUNCTION_LINES = 120
# A short idea lives in the module of the idea it serves: no module this short but a package's face.
MIN_MODULE_LINES = 40
# The top level holds only the commands.
MAX_TOP_LEVEL_MODULES = 10


def layer_of(module: str) -> str:
    """The layer a module of the `ci` package belongs to."""
    parts = module.split(".")
    if module == "ci":
        return "commands"  # the package's face: its names are loaded on first use, from any layer
    if module == "ci.github.api":
        return "web"
    if module == "ci.cli":
        return "cli"
    return FOLDER_LAYERS.get(parts[1], "commands")  # ci.run, ci.rehearse, ci.monitor, ci.drift, ci.rehearsal...


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
        if inside[:2] == ("rehearsal", "simulations"):
            continue  # the simulations: data copied into a sandbox (ci/rehearsal/simulations/)
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
                # `from ci.guide import model` imports the module ci.guide.model
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
        if a.imported != "ci" and LAYERS.index(layer_of(a.imported)) > LAYERS.index(layer_of(a.importer))
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


def undersized(root: Path) -> list[str]:
    """Modules under MIN_MODULE_LINES lines that are not a package's `__init__` or `__main__`."""
    found = []
    for _, path in harness_modules(root):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if path.name not in ("__init__.py", "__main__.py") and lines < MIN_MODULE_LINES:
            found.append(f"{path.relative_to(root.parent)}: {lines} lines (fold it into the module of its idea)")
    return found


def top_level_modules(root: Path) -> list[str]:
    """The modules at the package's top level, its face and `__main__` aside."""
    return sorted(p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def test_modules_and_functions_stay_within_the_ceilings() -> None:
    assert oversized(CI) == []


def test_no_module_is_cut_too_small() -> None:
    assert undersized(CI) == []


def test_the_top_level_holds_only_the_commands() -> None:
    modules = top_level_modules(CI)
    assert len(modules) + 2 <= MAX_TOP_LEVEL_MODULES, modules  # with __init__ and __main__
    assert set(modules) <= {"cli.py", "drift.py", "monitor.py", "precommit.py", "registry.py", "rehearse.py"}


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
            "guide/__init__.py": "",
            "guide/plan.py": upward,
            "runner/__init__.py": "",
            "runner/execute.py": "from ci.runner import step\n",
            "runner/step.py": "from . import execute\n",
        },
    )
    found = arrows(root)
    assert against_the_stages(found) == [
        f"ci.guide.plan (line {1 if where == 'top' else 2}, guide) imports ci.runner.execute (runner)"
    ]
    assert ["ci.runner.execute", "ci.runner.step", "ci.runner.execute"] in cycles(found)


def test_the_rules_catch_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "".join(f"    x = {n}\n" for n in range(MAX_FUNCTION_LINES))
    root = _write(tmp_path, {"__init__.py": "", "big.py": "def f() -> None:\n" + body + "\n" * MAX_MODULE_LINES})
    assert oversized(root) == [
        f"ci/big.py: {MAX_MODULE_LINES + MAX_FUNCTION_LINES + 1} lines (module limit {MAX_MODULE_LINES})",
        f"ci/big.py:1: f is {MAX_FUNCTION_LINES + 1} lines (function limit {MAX_FUNCTION_LINES})",
    ]


def test_the_rules_catch_a_module_cut_too_small_and_a_crowded_top_level(tmp_path: Path) -> None:
    files = {"__init__.py": "", "__main__.py": "", "guide/__init__.py": "", "guide/tiny.py": "x = 1\n"}
    files.update({f"command{n}.py": "\n" * MIN_MODULE_LINES for n in range(MAX_TOP_LEVEL_MODULES - 1)})
    root = _write(tmp_path, files)
    assert undersized(root) == ["ci/guide/tiny.py: 1 lines (fold it into the module of its idea)"]
    assert len(top_level_modules(root)) + 2 > MAX_TOP_LEVEL_MODULES


# What a passing run of a guide without front matter never uses, and so never runs: a module imported lazily sits in
# sys.modules as a subclass of ModuleType until its first use, and becomes a plain module as it runs
# what a passing run never needs: failures, a harness bug, the step summary, front matter, processes left behind
NOT_RUN_BY_A_PASSING_RUN = (
    "psutil",
    "yaml",
    "tempfile",
    "ci.expect.visible",
    "ci.report.summary",
    "ci.report.timeline",
    "ci.runner.bug",
    "base64",
    "datetime",
    "difflib",
)
_IMPORTED = """
import runpy, sys, types
names = sys.argv[3:]
sys.argv = ["ci.run", sys.argv[1], "--output-dir", sys.argv[2]]
try:
    runpy.run_module("ci.run", run_name="__main__")
except SystemExit as end:
    assert end.code == 0, end.code
print("imported:", *(name for name in names if type(sys.modules.get(name)) is types.ModuleType))
"""


def test_a_passing_run_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """Start-up is paid by every run: a passing block in a guide without front matter imports none of these."""
    import subprocess
    import sys

    guide = tmp_path / "guide.md"
    guide.write_text('```shell #test id="a"\necho hi\n```\n\n```shell #test-result id="a"\nhi\n```\n', encoding="utf-8")
    argv = [sys.executable, "-c", _IMPORTED, str(guide), str(tmp_path / "out"), *NOT_RUN_BY_A_PASSING_RUN]
    done = subprocess.run(argv, cwd=CI.parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "imported:"


def test_the_harness_records_behave_as_frozen_dataclasses() -> None:
    """ci.base.frozen shares the methods the standard decorator compiles for each class: the same class written
    both ways compares, hashes, shows, refuses changes and is replaced alike."""
    import dataclasses

    from ci.base import frozen

    def twin(decorate: Any) -> Any:
        @decorate
        class Attempt:
            number: int
            output: str = "out.txt"
            sizes: dict[str, int] = dataclasses.field(default_factory=dict, compare=False)

        return Attempt

    ours, standard = twin(frozen), twin(dataclass(frozen=True))
    for cls in (ours, standard):
        one, same, other = cls(1, sizes={"a": 1}), cls(1), cls(2)
        assert (one == same, one == other, one != other) == (True, False, True)
        assert hash(one) == hash(same) and len({one, same, other}) == 2
        assert dataclasses.replace(one, number=2) == other and one.number == 1
        assert [f.name for f in dataclasses.fields(one)] == ["number", "output", "sizes"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.number = 3
        with pytest.raises(dataclasses.FrozenInstanceError):
            del one.output
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.x = 1
        assert one.number == 1 and not hasattr(one, "x")
    assert repr(ours(1)) == repr(standard(1))
    assert repr(ours(1)).endswith(".Attempt(number=1, output='out.txt', sizes={})")
    assert ours(1) != standard(1), "another class is never equal, as with the standard decorator"


def test_a_record_of_one_field_or_none_compares_and_hashes() -> None:
    """A record of one field (the console's Palette, a diff's Gap) or of none compares and hashes as the standard
    frozen dataclass does, rather than failing with a TypeError."""
    from ci.base import frozen
    from ci.expect.diff import Gap
    from ci.report.colour import NO_COLOUR, Palette

    @frozen
    class Empty:
        pass

    assert Gap(3) == Gap(3) != Gap(4) and len({Gap(3), Gap(3), Gap(4)}) == 2
    assert Palette(enabled=False) == NO_COLOUR and hash(Palette(enabled=False)) == hash(NO_COLOUR)
    assert Empty() == Empty() and hash(Empty()) == hash(dataclass(frozen=True)(type("Empty", (), {}))())


def test_a_record_is_subclassed_as_a_frozen_dataclass_is() -> None:
    """A record built on a harness record, by either decorator, is a frozen dataclass with the fields of both."""
    import dataclasses

    from ci.base import frozen

    @frozen
    class Base:
        number: int

    for decorate in (frozen, dataclass(frozen=True)):

        @decorate
        class Derived(Base):
            name: str = "x"

        record = Derived(1)
        assert (record.number, record.name) == (1, "x") and record == Derived(1) != Derived(2)
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.name = "y"
    assert Base.__dataclass_params__.frozen  # type: ignore[attr-defined]
