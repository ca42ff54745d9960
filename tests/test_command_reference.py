"""docs/commands.md is what the commands' own --help says (docs/make_commands.py writes it), and the
documentation stays in pages a reader can take in: README.md a front door, no page of docs/ a book."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
MAKE = REPO / "docs" / "make_commands.py"
FIX = "docs/commands.md is not what the commands' --help says: run `python docs/make_commands.py` and commit it"


@functools.cache
def make_commands() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_commands", MAKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def generated() -> str:
    text: str = make_commands().page()
    return text


def test_the_command_reference_is_what_the_commands_say() -> None:
    written = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    assert written == generated(), FIX


def test_the_command_reference_has_every_installed_command() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    listed = {installed for installed, _, _ in make_commands().COMMANDS}
    assert set(scripts) <= listed, f"add {sorted(set(scripts) - listed)} to COMMANDS in docs/make_commands.py"
    for name in scripts:
        assert f"\n## {name} (python -m " in generated(), name


def test_the_reference_shows_each_subcommand() -> None:
    for heading in ("guide-guard-job prepare", "guide-guard-job stop", "guide-guard-job hand-back"):
        assert f"\n### {heading}\n" in generated(), heading
    assert "\n### guide-guard-release check\n" in generated()


def test_the_dialect_help_names_labels_the_default() -> None:
    """--dialect's help says labels is the default, as the run reads a guide; auto is only asked for."""
    said = " ".join(make_commands().command_help("ci.run").split())
    assert "; default: labels" in said, said
    assert "the default" not in said.split("--dialect", 2)[2].split("--timeout-rule", 1)[0]


def test_no_page_is_a_book() -> None:
    """README.md is a front door (at most 150 lines); each page of docs/ is read by one kind of reader, at most
    900 lines (docs/specforge.md, the guide itself, aside)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 150, f"README.md has {len(readme)} lines: move the detail to docs/"
    too_long = {
        page.name: count
        for page in sorted((REPO / "docs").glob("*.md"))
        if page.name != "specforge.md" and (count := len(page.read_text(encoding="utf-8").splitlines())) > 900
    }
    assert not too_long, f"pages over 900 lines: {too_long}; split them by reader"
