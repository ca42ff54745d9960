"""Opening a file ci.collect matched without following another user's symbolic link on the way to it.

A link planted by another user (in /tmp, say, where a guide's logs go) could
otherwise make the harness copy a file that user cannot read (root's, or the
harness user's own keys) into the uploaded artifact. The path is walked one
name at a time, by descriptor, as the kernel would walk it; a link is followed
only when it belongs to the user running the harness or to root, who could
read its target anyway.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["ForeignLink", "open_without_foreign_links"]

_MAX_LINKS = 40  # links followed in one walk, as the kernel's own limit (ELOOP past it)
_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ForeignLink(OSError):
    """A symbolic link on the way belongs to another user: it is not followed."""

    def __init__(self, link: str, owner: int) -> None:
        super().__init__(errno.EPERM, f"{link} is a symbolic link of another user (uid {owner}), not followed")
        self.link = link
        self.owner = owner


def open_without_foreign_links(path: str, flags: int) -> int:
    """A descriptor of the absolute PATH opened with FLAGS, reached through links of this user or root only.

    ForeignLink when a link on the way (PATH itself among them) is another
    user's; OSError as open(2) raises it otherwise (a file swapped for a link
    while walked cannot be opened: ELOOP, ENOTDIR).
    """
    trusted = {os.geteuid(), 0}
    pending = [name for name in reversed(path.split("/")) if name not in ("", ".")]
    walked = "/"  # the directory the walk is in, for messages
    current = os.open("/", _DIRECTORY)
    followed = 0
    try:
        while pending:
            name = pending.pop()
            status = os.stat(name, dir_fd=current, follow_symlinks=False)
            if stat.S_ISLNK(status.st_mode):
                if status.st_uid not in trusted:
                    raise ForeignLink(os.path.join(walked, name), status.st_uid)
                followed += 1
                if followed > _MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
                target = os.readlink(name, dir_fd=current)
                pending.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
                if target.startswith("/"):
                    root = os.open("/", _DIRECTORY)
                    os.close(current)
                    current, walked = root, "/"
                continue
            if not pending:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            below = os.open(name, _DIRECTORY, dir_fd=current)
            os.close(current)
            current, walked = below, os.path.normpath(os.path.join(walked, name))
    finally:
        os.close(current)
    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
