"""The git side of the drift check: the repository, the guides changed since the base, their text there."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ci.guide.parse import parse_guide

__all__ = ["GitError", "changed_guides", "guides_at_base", "old_text", "run_git"]

GIT_TIMEOUT_S = 120.0  # a local repository answers in far less; more means git waits on something


class GitError(Exception):
    """A git command failed: the base revision or the repository is not what was expected."""


def _git(args: Sequence[str], cwd: str | None, timeout_s: float) -> subprocess.CompletedProcess[bytes]:
    """Run git; GitError when it hangs or cannot be started (its exit status is the caller's to judge)."""
    try:
        return subprocess.run(["git", *args], capture_output=True, cwd=cwd, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} did not finish in {timeout_s:g}s") from None
    except OSError as exc:
        raise GitError(f"git could not be started: {exc}") from None


def run_git(*args: str, cwd: str | None = None, timeout_s: float = GIT_TIMEOUT_S, paths: bool = False) -> str:
    """git's output; GitError when it fails.

    `paths`: the output is file names (`-z`), decoded as the OS decodes them, so that a name that is not
    UTF-8 still names its file; other output has such bytes replaced.
    """
    done = _git(args, cwd, timeout_s)
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", errors="replace").strip()
        raise GitError(f"git {' '.join(args)}: {stderr or f'exit {done.returncode}'}")
    return os.fsdecode(done.stdout) if paths else done.stdout.decode("utf-8", errors="replace")


def old_text(base: str, top: str, path: str) -> str | None:
    """The guide's text at the base revision; None when it did not exist there (GitError when git hangs)."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(top))
    done = _git(["show", f"{base}:{relative}"], top, GIT_TIMEOUT_S)
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace").removeprefix("\ufeff")


def _labelled(text: str, path: str) -> bool:
    return bool(parse_guide(text, path).blocks)


def changed_guides(base: str, top: str, is_guide: Callable[[str, str], bool] = _labelled) -> list[str]:
    """Markdown files changed since the merge base with REV that are guides now or at REV: IS_GUIDE(text, path),
    by default when they hold labelled blocks."""
    names = run_git("diff", "--name-only", "-z", "--diff-filter=d", f"{base}...HEAD", cwd=top, paths=True).split("\0")
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
        if is_guide(text, path) or (old is not None and is_guide(old, path)):
            guides.append(path)
    return guides


def guides_at_base(
    base: str, paths: Sequence[str], is_guide: Callable[[str, str], bool] = _labelled
) -> list[tuple[str, str | None]]:
    """The guides to check, each with its text at `base`: `paths`, else the changed guides (changed_guides, which
    IS_GUIDE tells).

    Run inside the repository; GitError when it is not one or `base` names no commit.
    """
    top = run_git("rev-parse", "--show-toplevel").strip()
    run_git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    return [(path, old_text(base, top, path)) for path in (list(paths) or changed_guides(base, top, is_guide))]
