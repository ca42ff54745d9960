"""Glob matching for ci.collect: `**` walks directories without following symbolic links, within a bound."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Iterator

from ci.base import frozen

__all__ = ["MAX_DIRECTORIES", "GlobSearch", "search_glob"]

MAX_DIRECTORIES = 10_000  # directories one glob's search may list: a glob like /** must not walk a whole disk
_MAGIC = re.compile(r"[*?[]")
_ESCAPED = re.compile(r"\[([*?[])\]")  # what glob.escape makes of a special character


@frozen
class GlobSearch:
    """What one glob matched, and why its search stopped early, if it did."""

    matches: tuple[str, ...]  # absolute paths, sorted, each once
    stopped: str | None  # None when complete; else why not, to follow "the search stopped" ("early: ...", "after ...")


def search_glob(
    pattern: str, *, interrupted: Callable[[], str | None], max_directories: int = MAX_DIRECTORIES
) -> GlobSearch:
    """Match an absolute glob (its literal parts escaped as glob.escape does) against the file system.

    As glob.glob(recursive=True) matches, but for two things: `**` (zero or
    more directories) never follows a symbolic link to a directory, so a
    link back up the tree cannot make the walk endless; and the search lists
    at most max_directories directories, and asks `interrupted` (which says
    why the search must stop, or None) before each. `*`, `?` and `[...]` do
    not match a leading dot unless the pattern's part starts with one.
    """
    walk = _Walk(interrupted, max_directories)
    parts = tuple(part for part in pattern.split("/") if part)
    # depth first, so that a search cut short still has every match found before
    matches = set(walk.matches("/", parts))
    return GlobSearch(tuple(sorted(matches)), walk.stopped)


class _Walk:
    """The directories listed so far by one search, and whether it must stop."""

    def __init__(self, interrupted: Callable[[], str | None], max_directories: int) -> None:
        self.interrupted = interrupted
        self.max_directories = max_directories
        self.listed = 0
        self.stopped: str | None = None

    def matches(self, directory: str, parts: tuple[str, ...]) -> Iterator[str]:
        """The paths under directory that match the parts of the pattern."""
        if not parts:
            yield directory
            return
        for path in self.step(directory, parts[0], last=len(parts) == 1):
            yield from self.matches(path, parts[1:])

    def step(self, directory: str, part: str, *, last: bool) -> Iterable[str]:
        """The paths under directory that match one part of the pattern (only directories, unless it is the last)."""
        literal = _literal(part)
        if literal is not None:
            path = os.path.join(directory, literal)
            return [path] if (os.path.lexists(path) if last else os.path.isdir(path)) else []
        if part == "**":
            return self._below(directory, last=last)
        hidden_too = part.startswith(".")
        return [
            os.path.join(directory, entry.name)
            for entry in self._entries(directory)
            if (hidden_too or not entry.name.startswith("."))
            and fnmatch.fnmatchcase(entry.name, part)
            and (last or _is_directory(entry, follow_symlinks=True))
        ]

    def _below(self, top: str, *, last: bool) -> Iterator[str]:
        """`**`: top and every directory below it (everything below, as the last part), no link followed."""
        if not last:
            yield top
        pending = [top]
        while pending and self.stopped is None:
            directory = pending.pop()
            for entry in self._entries(directory):
                if entry.name.startswith("."):
                    continue
                path = os.path.join(directory, entry.name)
                # a link to a directory is a match itself (as the last part), never a way further down
                if _is_directory(entry, follow_symlinks=False):
                    pending.append(path)
                    yield path
                elif last:
                    yield path

    def _entries(self, directory: str) -> list[os.DirEntry[str]]:
        """The entries of one directory, counted; none once the search must stop, or when it cannot be listed."""
        if self.stopped is None:
            reason = self.interrupted()
            if reason is not None:
                self.stopped = f"early: {reason}"
            elif self.listed >= self.max_directories:
                self.stopped = f"after listing {self.max_directories:,} directories (the limit)"
        if self.stopped is not None:
            return []
        self.listed += 1
        try:
            with os.scandir(directory) as entries:
                return list(entries)
        except OSError:  # unreadable, gone meanwhile, or not a directory: no match in it, as for glob
            return []


def _literal(part: str) -> str | None:
    """The name a part of the pattern stands for when it has no wildcard (escapes undone); else None."""
    if _MAGIC.search(_ESCAPED.sub("", part)):
        return None
    return _ESCAPED.sub(r"\1", part)


def _is_directory(entry: os.DirEntry[str], *, follow_symlinks: bool) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow_symlinks)
    except OSError:
        return False
