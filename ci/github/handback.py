"""Handing back to the runner's user what a container job's root wrote into the host's directories.

Container steps run as root, and the workspace, the runner's temporary directory and HOME are the host's
directories: left as root's, the runner's own user could not clean them before its next job (its checkout fails).

The standard library only: a job whose harness was never installed (its install failed) runs this file itself
with the image's Python (`python3 -I .guide-guard/ci/github/handback.py --remove DIR`), so root's files are handed
back all the same.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HandBack", "Owner", "hand_back", "hand_back_job", "owner_to_restore", "report_lines"]


@dataclass(frozen=True)
class Owner:
    """A file's owner, as numbers."""

    uid: int  # the user
    gid: int  # the group

    def __str__(self) -> str:
        return f"{self.uid}:{self.gid}"


@dataclass(frozen=True)
class HandBack:
    """What a hand-back did."""

    owner: Owner | None  # whom the files were given to; None when nothing was to be handed back
    paths: tuple[Path, ...]  # the trees handed back
    failed: tuple[str, ...]  # a line per path that could not be changed (gone meanwhile, a read-only mount)


def owner_to_restore(my_uid: int, reference_owner: Owner) -> Owner | None:
    """Whom to give the files to, or None: only root can change owners, and only a runner that is not root's needs it.

    REFERENCE_OWNER owns a directory the runner made as its own user before the container started (the
    workspace's parent).
    """
    if my_uid != 0 or reference_owner.uid == 0:
        return None
    return reference_owner


def _change_owner(path: Path, owner: Owner, failed: list[str]) -> None:
    try:
        os.lchown(path, owner.uid, owner.gid)  # a symbolic link itself, never what it points to
    except OSError as error:
        failed.append(f"{path}: {error.strerror}")


def _hand_back_tree(top: Path, owner: Owner, failed: list[str]) -> None:
    _change_owner(top, owner, failed)
    if top.is_symlink() or not top.is_dir():
        return
    # followlinks=False: a link to a directory is handed back itself, and what it leads to (/etc, say) is not
    for directory, subdirectories, files in os.walk(top, onerror=lambda error: failed.append(str(error))):
        for name in (*subdirectories, *files):
            _change_owner(Path(directory, name), owner, failed)


def hand_back(paths: Iterable[Path], reference: Path, remove: Iterable[Path] = ()) -> HandBack:
    """Remove REMOVE (the blocks' directory: the guide's clones and builds), then give every file under PATHS
    to the owner of REFERENCE, when this process is root and REFERENCE is not root's."""
    for directory in remove:
        shutil.rmtree(directory, ignore_errors=True)
    stat = reference.stat()
    owner = owner_to_restore(os.geteuid(), Owner(stat.st_uid, stat.st_gid))
    trees = tuple(path for path in paths if path.exists() or path.is_symlink())
    if owner is None:
        return HandBack(None, trees, ())
    failed: list[str] = []
    for path in trees:
        _hand_back_tree(path, owner, failed)
    return HandBack(owner, trees, tuple(failed))


def hand_back_job(environ: Mapping[str, str], remove: Iterable[Path] = ()) -> HandBack:
    """A job's hand-back: the workspace, RUNNER_TEMP and HOME of ENVIRON, to the owner of the workspace's parent
    (which the runner made as its own user before the container started). KeyError without GITHUB_WORKSPACE."""
    workspace = Path(environ["GITHUB_WORKSPACE"])
    paths = [Path(environ[name]) for name in ("GITHUB_WORKSPACE", "RUNNER_TEMP", "HOME") if environ.get(name)]
    return hand_back(paths, workspace.parent, remove)


def report_lines(done: HandBack) -> list[str]:
    """What a hand-back says in the job's log."""
    lines = [f"not handed back: {line}" for line in done.failed]
    if done.owner is None:
        return [*lines, "nothing to hand back: not root, or the runner's user is root"]
    return [*lines, f"{', '.join(map(str, done.paths))} belong to {done.owner} again"]


def _main(argv: Sequence[str]) -> int:
    """`python3 -I handback.py [--remove DIR]...`: the job's hand-back without the harness installed."""
    if len(argv) % 2 or any(flag != "--remove" for flag in argv[::2]):
        print("usage: handback.py [--remove DIR]...", file=sys.stderr)
        return 2
    try:
        done = hand_back_job(os.environ, [Path(directory) for directory in argv[1::2]])
    except (KeyError, OSError) as error:
        # its own [ERROR] line, not ci.cli's print_error: a job runs this file with `python3 -I` where the harness
        # is not installed, so it imports the standard library only
        print(
            f"[ERROR] no workspace to hand back ({error}): run this in a job, where GITHUB_WORKSPACE is set",
            file=sys.stderr,
        )
        return 2
    print("\n".join(report_lines(done)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
