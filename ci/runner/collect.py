"""Collection: copy the files a guide's `ci.collect` globs name into the output directory when its run ends."""

from __future__ import annotations

import glob
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from ci.core.model import CollectedFile, Collection
from ci.core.text import human_size

__all__ = ["COLLECT_CAP_BYTES", "COLLECT_MAX_FILES", "COLLECT_TOTAL_BYTES", "collect_files"]

COLLECT_CAP_BYTES = 64 * 1024 * 1024  # of each file, its last this many bytes are kept
COLLECT_TOTAL_BYTES = 1024 * 1024 * 1024  # for all files of one guide: a glob like /var/log/** must not fill the disk
COLLECT_MAX_FILES = 1000  # matches of one guide beyond this are counted, neither copied nor listed
_CHUNK_BYTES = 1024 * 1024


def collect_files(
    patterns: Sequence[str],
    *,
    workdir: str,
    destination: Path,
    home: str | None = None,
    cap_bytes: int = COLLECT_CAP_BYTES,
    total_bytes: int = COLLECT_TOTAL_BYTES,
    deadline: float | None = None,
    exclude: Path | None = None,
) -> Collection:
    """Copy every file matching the globs under destination, mirroring its absolute path.

    A glob is absolute, starts with `~` (home, else $HOME), or is relative to
    workdir; `**` spans directories. Each file keeps at most its last
    cap_bytes. Nothing here raises for a file: what could not be copied (a
    FIFO, a directory, an unreadable file, a file changing meanwhile, the
    monotonic deadline passed) is said in its note. Matches under destination
    or exclude (the output directory) are the harness's own files: left out.
    """
    files: list[CollectedFile] = []
    unmatched: list[str] = []
    seen: set[str] = set()
    left_out = 0
    budget = total_bytes
    # the harness's own files (earlier copies, block outputs) are not the guide's
    own = [os.path.realpath(directory) for directory in (destination, exclude) if directory is not None]
    for pattern in patterns:
        matches = sorted(glob.glob(_absolute_glob(pattern, workdir, home), recursive=True))
        matches = [m for m in matches if not any(_inside(m, directory) for directory in own)]
        if not matches:
            unmatched.append(pattern)
        for match in matches:
            source = os.path.normpath(match)
            if source in seen:
                continue
            seen.add(source)
            if len(files) >= COLLECT_MAX_FILES:
                left_out += 1
                continue
            if deadline is not None and time.monotonic() >= deadline:
                files.append(CollectedFile(pattern, source, None, 0, 0, False, "not copied: the run was stopping"))
                continue
            target = destination / source.lstrip("/")
            file_cap_bytes = min(cap_bytes, max(budget, 0))
            copied = _copy_tail(pattern, source, target, file_cap_bytes, deadline)
            budget -= copied.copied_bytes
            if copied.truncated and file_cap_bytes < cap_bytes:
                copied = _with_note(copied, f"the collection's {human_size(total_bytes)} in all was used up")
            files.append(copied)
    return Collection(str(destination), cap_bytes, tuple(files), tuple(unmatched), left_out)


def _absolute_glob(pattern: str, workdir: str, home: str | None) -> str:
    """The glob made absolute; the directories put in front of it are escaped, so their names match literally."""
    if pattern == "~" or pattern.startswith("~/"):
        base = home or os.environ.get("HOME") or os.path.expanduser("~")
        return glob.escape(base) + pattern[1:]
    expanded = os.path.expanduser(pattern)  # ~user
    if os.path.isabs(expanded):
        return expanded
    return os.path.join(glob.escape(workdir), expanded)


def _inside(path: str, real_directory: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), real_directory]) == real_directory


def _with_note(copied: CollectedFile, note: str) -> CollectedFile:
    joined = f"{copied.note}; {note}" if copied.note else note
    return CollectedFile(
        copied.pattern,
        copied.source,
        copied.copied_to,
        copied.size_bytes,
        copied.copied_bytes,
        copied.truncated,
        joined,
    )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory (collect the files in it, e.g. DIR/*.log)"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _copy_tail(pattern: str, source: str, target: Path, cap_bytes: int, deadline: float | None) -> CollectedFile:
    """Copy the last cap_bytes of one file as they were when the copy started; say what went wrong instead of raising."""

    def failed(note: str, size_bytes: int = 0) -> CollectedFile:
        return CollectedFile(pattern, source, None, size_bytes, 0, False, f"not copied: {note}")

    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; it changes nothing for a regular file
        descriptor = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        return failed(f"cannot open it ({exc.strerror or exc})")
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            return failed(_kind(status.st_mode))
        size = status.st_size
        # a file claiming size 0 may still have content (/proc, /sys): read it from the start, up to the cap
        start, end = (max(0, size - cap_bytes), size) if size else (0, cap_bytes)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            return failed(f"cannot write {target} ({exc.strerror or exc})", size)
        notes = []
        position = start
        try:
            while position < end:
                if deadline is not None and time.monotonic() >= deadline:
                    notes.append("cut short: the run was stopping")
                    break
                chunk = os.pread(descriptor, min(_CHUNK_BYTES, end - position), position)
                if not chunk:
                    if size:
                        notes.append(f"it shrank to {human_size(position)} while copied")
                    break
                os.write(out, chunk)
                position += len(chunk)
        except OSError as exc:
            notes.append(f"copy stopped at {human_size(position - start)}: {exc.strerror or exc}")
        finally:
            os.close(out)
        copied = position - start
        grown = os.fstat(descriptor).st_size
        if size and grown > size:
            notes.append(f"it grew by {human_size(grown - size)} while copied; the copy ends where it ended then")
        if not size:
            size = copied
        truncated = start > 0 or (status.st_size == 0 and copied >= cap_bytes)
        return CollectedFile(pattern, source, str(target), size, copied, truncated, "; ".join(notes))
    finally:
        os.close(descriptor)
