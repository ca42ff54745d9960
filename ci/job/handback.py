"""Handing back to the runner's user what a container job's root wrote into the host's directories.

Container steps run as root, and the workspace, the runner's temporary directory and HOME are the host's
directories: left as root's, the runner's own user could not clean them before its next job (its checkout fails).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HandBack", "Owner", "hand_back", "owner_to_restore"]


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
