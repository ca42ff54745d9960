"""The git side of the drift check: the repository, the guides changed since the base, their text there."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ci.core.parse import parse_guide

__all__ = ["GitError", "changed_guides", "guides_at_base", "old_text", "run_git"]


class GitError(Exception):
    """A git command failed: the base revision or the repository is not what was expected."""


def run_git(*args: str, cwd: str | None = None) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def old_text(base: str, top: str, path: str) -> str | None:
    """The guide's text at the base revision; None when it did not exist there."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(top))
    done = subprocess.run(["git", "show", f"{base}:{relative}"], capture_output=True, cwd=top, timeout=120, check=False)
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace").removeprefix("\ufeff")


def changed_guides(base: str, top: str) -> list[str]:
    """Markdown files changed since the merge base with REV that hold labelled blocks (now or at REV)."""
    names = run_git("diff", "--name-only", "-z", "--diff-filter=d", f"{base}...HEAD", cwd=top).split("\0")
    guides = []
    for name in names:
        if not name.lower().endswith(".md"):
            continue
        path = os.path.relpath(os.path.join(top, name))
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        old = old_text(base, top, path)
        if parse_guide(text, path).blocks or (old is not None and parse_guide(old, path).blocks):
            guides.append(path)
    return guides


def guides_at_base(base: str, paths: Sequence[str]) -> list[tuple[str, str | None]]:
    """The guides to check, each with its text at `base`: `paths`, else the changed guides (changed_guides).

    Run inside the repository; GitError when it is not one or `base` names no commit.
    """
    top = run_git("rev-parse", "--show-toplevel").strip()
    run_git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    return [(path, old_text(base, top, path)) for path in (list(paths) or changed_guides(base, top))]
