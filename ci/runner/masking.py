"""--mask-files: the secret values masked (***) in the files a run keeps, before they leave the machine as an artifact.

A file is read in chunks, never whole: block outputs can be gigabytes. Only
a file that holds a secret is rewritten (beside itself, then renamed over
it, keeping its permission bits, never a set-user-ID one); any other is not touched. The masking is the
Masker's (`Masker.mask_bytes`), on the bytes: what is not UTF-8 stays as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ci.base.text import Masker, escape_undecodable, plural

__all__ = [
    "MASKED_DIRECTORIES",
    "STOPPING_MASK_S",
    "FileMasking",
    "MaskingTimeUp",
    "mask_file",
    "mask_names",
    "mask_output_files",
    "masking_lines",
    "stopping_ends_by",
]

# under the output directory: every file the run writes there (actions-files: blocks' copies of the runner's files)
MASKED_DIRECTORIES = ("blocks", "collected", "actions-files")
_CHUNK_BYTES = 1024 * 1024


class MaskingTimeUp(Exception):
    """The time given to the masking was up before this file was done: it is left as it was."""


@dataclasses.dataclass
class FileMasking:
    """What --mask-files did: the files rewritten, those renamed, and those it could not mask (each with why)."""

    masked: list[Path] = dataclasses.field(default_factory=list)
    renamed: list[Path] = dataclasses.field(default_factory=list)  # files and directories whose name held a secret
    unmasked: list[tuple[Path, str]] = dataclasses.field(default_factory=list)


def mask_output_files(output_dir: Path, masker: Masker, ends_by: Callable[[], float | None]) -> FileMasking:
    """Mask every secret in every file under OUTPUT_DIR's blocks/, collected/ and actions-files/, the smallest first.

    ENDS_BY, asked between chunks, is when the masking must end (None: no
    limit; a stop signal sets one). A file not done by then is left whole and
    unmasked, and listed as such, as is one that cannot be read or replaced.
    """
    done = FileMasking()
    if not masker.secrets:
        return done
    done.renamed = mask_names(output_dir, masker)  # first: no later line names a file by its secret
    files = sorted(_files_under(output_dir), key=lambda found: (found[1], str(found[0])))
    for path, _ in files:
        try:
            if mask_file(path, masker, ends_by):
                done.masked.append(path)
        except MaskingTimeUp:
            done.unmasked.append((path, "the run was stopping and its time was up"))
        except OSError as exc:
            done.unmasked.append((path, exc.strerror or str(exc)))
    return done


def _files_under(output_dir: Path) -> Iterator[tuple[Path, int]]:
    """The regular files under OUTPUT_DIR's masked directories, with their sizes; symbolic links are not followed."""
    for name in MASKED_DIRECTORIES:
        if not (output_dir / name).is_dir() or (output_dir / name).is_symlink():
            continue  # a link planted in place of the directory: the files it leads to are not the run's
        for directory, _, names in os.walk(output_dir / name):
            for file_name in names:
                path = Path(directory, file_name)
                with contextlib.suppress(OSError):
                    status = path.lstat()
                    if stat.S_ISREG(status.st_mode):
                        yield path, status.st_size


def mask_file(
    path: Path, masker: Masker, ends_by: Callable[[], float | None] = lambda: None, chunk_bytes: int = _CHUNK_BYTES
) -> bool:
    """Replace every secret in the file at PATH by ***; whether it held one (a file without is not touched).

    MaskingTimeUp when ENDS_BY passes first: the file is then as it was.
    """
    # O_NOFOLLOW, O_NONBLOCK: a file swapped for a link or a FIFO since it was listed is not opened, nor waited on
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with open(descriptor, "rb") as source:
        windows = masker.masked_windows(_reads(source, ends_by, chunk_bytes))
        if all(raw == masked for raw, masked in windows):
            return False
        source.seek(0)
        mode = os.fstat(source.fileno()).st_mode & 0o777  # its permissions; never a set-user-ID bit, the owner is ours
        short = os.fsdecode(os.fsencode(path.name)[:100])  # in bytes: a name may be any bytes, up to 255 of them
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{short}.", suffix=".masking")
        try:
            with open(handle, "wb") as target:
                for _, masked in masker.masked_windows(_reads(source, ends_by, chunk_bytes)):
                    if masked.count(0) == len(masked):  # a hole of a sparse file stays one
                        target.seek(len(masked), os.SEEK_CUR)
                    else:
                        target.write(masked)
                target.truncate()
                os.fchmod(target.fileno(), mode)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    return True


def _reads(source: BinaryIO, ends_by: Callable[[], float | None], chunk_bytes: int) -> Iterator[bytes]:
    """The file's consecutive reads, up to its end; MaskingTimeUp once ENDS_BY has passed."""
    while True:
        limit = ends_by()
        if limit is not None and time.monotonic() >= limit:
            raise MaskingTimeUp
        chunk = source.read(chunk_bytes)
        yield chunk
        if not chunk:
            return


def mask_names(output_dir: Path, masker: Masker) -> list[Path]:
    """Rename each file and directory under OUTPUT_DIR's masked directories whose name holds a secret, *** in its
    place (a `.N` suffix when that name is taken); the new paths. A collected file is named after its source."""
    renamed = []
    for name in MASKED_DIRECTORIES:
        top = output_dir / name
        if top.is_symlink() or not top.is_dir():  # a link planted in its place leads outside: never renamed there
            continue
        for directory, directories, files in os.walk(top, topdown=False):
            for entry in [*files, *directories]:
                masked = masker.mask(entry)
                if masked == entry:
                    continue
                target = Path(directory, masked)
                number = 1
                while os.path.lexists(target):
                    target, number = Path(directory, f"{masked}.{number}"), number + 1
                with contextlib.suppress(OSError):
                    os.rename(Path(directory, entry), target)
                    renamed.append(target)
    return renamed


STOPPING_MASK_S = 1.8  # after a stop signal: when the masking must be over, so that the run ends within 2 s of it
_STOPPING_MASK_LEAST_S = 0.1  # however late the masking starts after one: a moment for the small files
_LISTED_UNMASKED = 10


def stopping_ends_by(stopped_at: Callable[[], float | None]) -> Callable[[], float | None]:
    """An ENDS_BY for mask_output_files: none until a stop signal (STOPPED_AT: when it came), then shortly after it."""
    begun = time.monotonic()

    def ends_by() -> float | None:
        signal_at = stopped_at()
        return None if signal_at is None else max(signal_at + STOPPING_MASK_S, begun + _STOPPING_MASK_LEAST_S)

    return ends_by


def masking_lines(done: FileMasking, output_dir: Path) -> tuple[str | None, str | None]:
    """What the console says of it: the files masked (None when none held a secret), and an error for those left."""
    names = f" and in the names of {plural(len(done.renamed), 'file')}" if done.renamed else ""
    said = (
        f"masked secrets in {plural(len(done.masked), 'file')}{names} under {output_dir} (--mask-files)"
        if done.masked or done.renamed
        else None
    )
    if not done.unmasked:
        return said, None
    listed = "; ".join(f"{path.relative_to(output_dir)} ({why})" for path, why in done.unmasked[:_LISTED_UNMASKED])
    more = len(done.unmasked) - _LISTED_UNMASKED
    error = (
        f"--mask-files: {plural(len(done.unmasked), 'file')} under {output_dir} could not be masked and may hold"
        f" secret values as the blocks printed them: {listed}{f'; and {more} more' if more > 0 else ''}."
        " Do not publish the output directory (an artifact) as it is: delete or mask these files first"
    )
    return said, escape_undecodable(error)
