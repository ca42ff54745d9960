"""Writing a file whole or not at all, for files that others may read at any moment."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str | bytes, *, encoding: str = "utf-8") -> None:
    """Replace PATH's content with TEXT (or bytes) so that a reader sees the old file or the new one, never a part.

    The text goes to a temporary file beside PATH, then takes PATH's name in
    one rename; a file that existed keeps its permission bits, and its owner
    when this user may give it (root). Line endings are written as they are
    in TEXT. OSError when it cannot be written (a full disk among the
    causes); the temporary file is removed then.
    """
    # beside the target: a rename is atomic only within one file system; the pid keeps two writers apart; the
    # name cut so that a target named with the file system's longest name (255 bytes) still has a temporary
    short = os.fsencode(path.name)[:100].decode("utf-8", errors="ignore")  # in bytes: a name may be any UTF-8
    temporary = path.with_name(f".{short}.{os.getpid()}.tmp")
    try:
        if isinstance(text, bytes):
            with open(temporary, "wb") as binary:
                binary.write(text)
        else:
            with open(temporary, "w", encoding=encoding, newline="") as handle:
                handle.write(text)
        with contextlib.suppress(FileNotFoundError):
            before = path.stat()
            if (before.st_uid, before.st_gid) != (os.geteuid(), os.getegid()):
                # root writing another user's file keeps it theirs; anyone else may not give a file away
                with contextlib.suppress(PermissionError):
                    os.chown(temporary, before.st_uid, before.st_gid)
            os.chmod(temporary, before.st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
