"""The guide registry (guides.yaml): one entry per guide a schedule runs, checked, and turned into a matrix."""

from __future__ import annotations

from pathlib import Path

from ci.github.registry.check import entry_problems
from ci.github.registry.model import (
    BLOCK_HEADROOM_MINUTES,
    DEADLINE_MARGIN_MINUTES,
    GROUPS,
    MATRIX_KEYS,
    REGISTRY_FILE,
    UPSTREAM_SIGNALS,
    Entry,
    Registry,
    Upstream,
)
from ci.github.registry.read import ENTRY_KEYS, TOP_KEYS, UPSTREAM_KEYS, read_entries
from ci.guide.model import Problem

__all__ = [
    "BLOCK_HEADROOM_MINUTES",
    "DEADLINE_MARGIN_MINUTES",
    "ENTRY_KEYS",
    "GROUPS",
    "MATRIX_KEYS",
    "REGISTRY_FILE",
    "TOP_KEYS",
    "UPSTREAM_KEYS",
    "UPSTREAM_SIGNALS",
    "Entry",
    "Registry",
    "RegistryError",
    "Upstream",
    "load_registry",
]


class RegistryError(Exception):
    """The registry cannot be used: every problem found, each at its file:line."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems


def load_registry(path: str | Path, *, shown: str | None = None) -> Registry:
    """Read and check the registry at PATH: its entries, and each entry's guide (parsed, never run).

    Guide paths are relative to the registry's directory; a guide named by URL is not fetched.
    RegistryError lists every problem.
    """
    path = Path(path)
    name = shown or str(path)
    entries, problems = read_entries(path, name)
    for entry in entries:
        problems.extend(entry_problems(entry, name, path.parent))
    if problems:
        raise RegistryError(sorted(problems, key=lambda problem: problem.line))
    return Registry(name, tuple(entries))
