"""Full disks: whether the file system holding a path is full, and how a message says so."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from ci.core.text import human_size

__all__ = ["DiskSpace", "disk_space", "full_disk", "is_full", "os_error_text"]

# Less than this left is full: a write that failed for want of room leaves a few blocks at most, and a
# block printing more than this would have failed there too.
NEARLY_FULL_BYTES = 64 * 1024


@dataclass(frozen=True)
class DiskSpace:
    """What a file system has left for the harness's user, and where it is mounted."""

    free_bytes: int  # what the harness's user may still write (root may also use the blocks kept for root)
    free_inodes: int | None  # files that may still be made; None where the file system keeps no count
    mount_point: str  # the top directory of the file system


def is_full(space: DiskSpace) -> bool:
    """Whether nothing more of any size can be written there: too few bytes, or no file can be made."""
    return space.free_bytes < NEARLY_FULL_BYTES or space.free_inodes == 0


def _mount_point(path: str) -> str:
    """The top directory of the file system holding PATH: the last ancestor on the same device."""
    device = os.stat(path).st_dev
    while True:
        parent = os.path.dirname(path)
        if parent == path or os.stat(parent).st_dev != device:
            return path
        path = parent


def disk_space(path: str | Path) -> DiskSpace | None:
    """The space left on the file system holding PATH (or its nearest ancestor that exists); None when not known."""
    where = os.path.abspath(path)
    try:
        while not os.path.exists(where) and os.path.dirname(where) != where:
            where = os.path.dirname(where)
        stats = os.statvfs(where)
        mount_point = _mount_point(where)
    except OSError:
        return None
    as_root = os.geteuid() == 0
    free_blocks = stats.f_bfree if as_root else stats.f_bavail
    free_inodes = (stats.f_ffree if as_root else stats.f_favail) if stats.f_files else None
    return DiskSpace(free_blocks * stats.f_frsize, free_inodes, mount_point)


def full_disk(path: str | Path) -> str | None:
    """`the disk is full: the file system holding PATH (mounted at M) has N free`, or None while it has room.

    None too when the file system cannot be asked. PATH is as given: the
    reports' cleaning writes a byte of it that is not UTF-8 as `\\xNN`.
    """
    space = disk_space(path)
    if space is None or not is_full(space):
        return None
    mounted = "" if space.mount_point == os.path.abspath(path) else f" (mounted at {space.mount_point})"
    left = "no room for another file" if space.free_inodes == 0 else f"{human_size(space.free_bytes)} free"
    return f"the disk is full: the file system holding {path}{mounted} has {left}"


def os_error_text(exc: OSError, path: str | Path) -> str:
    """EXC as a message says it: the OS's words, and for a full disk (ENOSPC, EDQUOT) the file system it is."""
    words = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        note = full_disk(path)  # None for a device that is never anything but full (/dev/full), a quota
        return f"{words}: {note}" if note else f"{words} (writing {path})"
    if exc.errno == errno.EDQUOT:
        return f"{words}: the disk quota on the file system holding {path} is used up"
    return words
