"""Writing files the harness owns: fresh ones, never through a link or into a FIFO planted at their names;
and full disks, said as such.

Every file the harness writes under its output directory is made new (or
takes its name in one rename): whatever stood at that name before (a file of
an earlier run, a symbolic link to a file elsewhere, a FIFO, a device) is
replaced, never opened, so the new file has this user's owner and its own
mode. Each directory between the output directory and the file is walked by
descriptor and must be a real directory: a link or other file standing where
one belongs is replaced by a new, empty directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from ci.base import frozen
from ci.base.text import human_size

__all__ = [
    "DiskSpace",
    "create_fresh",
    "disk_space",
    "full_disk",
    "is_full",
    "make_directories",
    "os_error_text",
    "remove_within",
    "rename_within",
    "write_atomically",
]

_ATTEMPTS = 5  # a name made again (by someone else) as fast as it is removed: given up after this many tries
_NEW_FILE_MODE = 0o644  # less the umask: a block's output, a collected copy
_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # a directory itself, never a link's target
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC  # O_EXCL: never an existing file


def _real_directory(parent: int, name: str) -> int:
    """A descriptor of the directory NAME in PARENT, made when missing; a link or a file standing there is removed
    first (the name is the harness's). OSError when it cannot be made."""
    for _ in range(_ATTEMPTS):
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent)
        try:
            return os.open(name, _DIRECTORY, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent)
    raise OSError(errno.ELOOP, "a link or a file kept taking the place of a directory", name)


def _directory(directory: Path, within: Path | None) -> int:
    """A descriptor of DIRECTORY. Below WITHIN (taken as it is: the user named it; FileNotFoundError when it is gone),
    each directory on the way is a real one, made when missing; with no WITHIN, DIRECTORY is taken as it is."""
    if within is None:
        return os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    names = directory.relative_to(within).parts  # ValueError for a file outside it: a bug of the caller
    if ".." in names:
        raise OSError(errno.EINVAL, "a `..` would lead out of the output directory", str(directory))
    descriptor = os.open(within, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            below = _real_directory(descriptor, name)
            os.close(descriptor)
            descriptor = below
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _create(directory: int, name: str, mode: int) -> int:
    """A new empty file NAME in DIRECTORY, opened to write; what stood at NAME (not a directory) is removed first."""
    for _ in range(_ATTEMPTS):
        try:
            return os.open(name, _NEW_FILE, mode, dir_fd=directory)
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=directory)  # IsADirectoryError for a directory: left, and said
    raise FileExistsError(errno.EEXIST, "something kept taking its name while it was made", name)


def make_directories(directory: Path, *, within: Path) -> None:
    """DIRECTORY under WITHIN and every directory on the way, real ones (see the module); OSError when it cannot."""
    os.close(_directory(directory, within))


def create_fresh(path: Path, *, within: Path, mode: int = _NEW_FILE_MODE) -> int:
    """A new, empty regular file at PATH (inside WITHIN), this user's, with MODE less the umask: its descriptor,
    open to write and not inherited.

    Whatever stood at PATH is removed first, never opened: a symbolic link
    (its target is not touched), a FIFO, a file of an earlier run. The
    directories from WITHIN down are made real ones (see the module). OSError
    when it cannot be made (a directory at PATH, a full disk).
    """
    try:
        directory = _directory(path.parent, within)
        try:
            return _create(directory, path.name, mode)
        finally:
            os.close(directory)
    except OSError as exc:  # named by the whole path, not the last name the walk used
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None


def rename_within(source: Path, target: Path, *, within: Path) -> None:
    """Give the file SOURCE the name TARGET, in the same directory under WITHIN, replacing what stood there.

    The rename goes through real directories only (see the module); what
    stood at TARGET (a link, a FIFO) is replaced, never written to.
    OSError when it cannot (SOURCE gone, TARGET a directory).
    """
    if source.parent != target.parent:
        raise OSError(errno.EXDEV, "not in the same directory", str(target))
    directory = _directory(target.parent, within)
    try:
        os.rename(source.name, target.name, src_dir_fd=directory, dst_dir_fd=directory)
    finally:
        os.close(directory)


def remove_within(path: Path, *, within: Path) -> None:
    """Remove the file PATH under WITHIN, through real directories only (see the module); OSError when it cannot."""
    directory = _directory(path.parent, within)
    try:
        os.unlink(path.name, dir_fd=directory)
    finally:
        os.close(directory)


def write_atomically(
    path: Path, text: str | bytes, *, encoding: str = "utf-8", within: Path | None = None, updating: bool = False
) -> None:
    """Replace PATH's content with TEXT (or bytes) so that a reader sees the old file or the new one, never a part.

    The text goes to a new temporary file beside PATH, then takes PATH's name
    in one rename: a link or a FIFO at PATH is replaced, never followed or
    opened. The new file is this user's, with the umask's mode, unless
    UPDATING says PATH is a file being updated (a guide, a state file): it
    then keeps the mode of the file it replaces, and its owner when this user
    may give it (root). With WITHIN, the directories from there to PATH are
    real ones (see the module). Line endings are written as they are in TEXT.
    OSError when it cannot be written (a full disk among the causes); the
    temporary file is removed then.
    """
    directory = _directory(path.parent, within)
    try:
        _replace_in(directory, path.name, text, encoding, updating)
    finally:
        os.close(directory)


def _replace_in(directory: int, name: str, text: str | bytes, encoding: str, updating: bool) -> None:
    # the pid and a random part keep two writers apart, O_EXCL anything planted at the name; the name is cut so
    # that a target named with the file system's longest name (255 bytes) still has a temporary
    short = os.fsencode(name)[:100].decode("utf-8", errors="ignore")  # in bytes: a name may be any UTF-8
    for _ in range(_ATTEMPTS):
        temporary = f".{short}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        with contextlib.suppress(FileExistsError):
            descriptor = os.open(temporary, _NEW_FILE, 0o666, dir_fd=directory)
            break
    else:
        raise FileExistsError(errno.EEXIST, "no temporary file could be made", name)
    try:
        with open(descriptor, "wb") as binary:
            binary.write(text if isinstance(text, bytes) else text.encode(encoding))
            if updating:
                _keep_owner_and_mode(binary.fileno(), directory, name)
        os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        raise


def _keep_owner_and_mode(descriptor: int, directory: int, name: str) -> None:
    """The new file of an update takes the mode (and, for root, the owner) of the file it replaces."""
    try:
        before = os.stat(name, dir_fd=directory)
    except FileNotFoundError:
        return
    if (before.st_uid, before.st_gid) != (os.geteuid(), os.getegid()):
        # root writing another user's file keeps it theirs; anyone else may not give a file away
        with contextlib.suppress(PermissionError):
            os.fchown(descriptor, before.st_uid, before.st_gid)
    os.fchmod(descriptor, before.st_mode & 0o7777)


# Less than this left is full: a write that failed for want of room leaves a few blocks at most, and a
# block printing more than this would have failed there too.
NEARLY_FULL_BYTES = 64 * 1024


@frozen
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
