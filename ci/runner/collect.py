"""Collection: copy the files a guide's `ci.collect` globs name into the output directory when its run ends."""

from __future__ import annotations

import dataclasses
import glob
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ci.base.files import create_fresh
from ci.base.text import human_size
from ci.record.outcome import CollectedFile, Collection
from ci.runner.globs import MAX_DIRECTORIES, search_glob
from ci.runner.links import ForeignLink, open_without_foreign_links
from ci.runner.predating import predates

__all__ = [
    "COLLECT_CAP_BYTES",
    "COLLECT_MAX_DIRECTORIES",
    "COLLECT_MAX_FILES",
    "COLLECT_PAST_DEADLINE_S",
    "COLLECT_TOTAL_BYTES",
    "collect_files",
    "mark_predating",
]

COLLECT_CAP_BYTES = 64 * 1024 * 1024  # of each file, its last this many bytes are kept
COLLECT_TOTAL_BYTES = 1024 * 1024 * 1024  # for all files of one guide: a glob like /var/log/** must not fill the disk
COLLECT_MAX_FILES = 1000  # matches of one guide beyond this are counted, neither copied nor listed
COLLECT_MAX_DIRECTORIES = MAX_DIRECTORIES  # directories one glob's search may list
COLLECT_PAST_DEADLINE_S = 60.0  # with --deadline, the collection ends this long after it (or after its start, if later)
# after a stop signal the whole stop must fit in a couple of seconds: less of each file, and little time in all
_STOPPING_CAP_BYTES = 4 * 1024 * 1024
_STOPPING_S = 0.5
_CHUNK_BYTES = 1024 * 1024
_STOPPING = "the run was stopping"


def collect_files(
    patterns: Sequence[str],
    *,
    workdir: str,
    destination: Path,
    home: str | None = None,
    cap_bytes: int = COLLECT_CAP_BYTES,
    total_bytes: int = COLLECT_TOTAL_BYTES,
    deadline: float | None = None,
    stop_requested: Callable[[], int | None] | None = None,
    exclude: Path | None = None,
) -> Collection:
    """Copy every file matching the globs under destination, mirroring its absolute path.

    A glob is absolute, starts with `~` (home, else $HOME), or is relative to
    workdir; `**` spans directories, without following symbolic links. Each
    file keeps at most its last cap_bytes. From the moment stop_requested
    (asked between directories, files and chunks) returns a signal, at most
    4 MiB of each file is kept and the collection ends half a second later;
    at the monotonic deadline it ends anyway. Nothing here raises for a file:
    what could not be copied (a FIFO, a directory, an unreadable file, a file
    changing meanwhile, time up) is said in its note; a search cut short, in
    the collection's notes. Matches under destination or exclude (the output
    directory) are the harness's own files: left out. A symbolic link on the
    way to a match is followed only when it is this user's or root's
    (ci.runner.links): another user's is not, and its match is not copied.
    Each copy is a new file (ci.base.files.create_fresh) under exclude (else
    destination), through real directories only: a link or a FIFO planted
    in the destination is replaced, never written through.
    """
    budget = _Budget(cap_bytes, total_bytes, deadline, stop_requested)
    files: list[CollectedFile] = []
    unmatched: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    left_out = 0
    # the harness's own files (earlier copies, block outputs) are not the guide's
    own = [os.path.realpath(directory) for directory in (destination, exclude) if directory is not None]
    for pattern in patterns:
        found = search_glob(_absolute_glob(pattern, workdir, home), interrupted=budget.check)
        if found.stopped is not None:
            notes.append(f"{pattern}: the search stopped {found.stopped}; files further on were not looked for")
        matches = [m for m in found.matches if not any(_inside(m, directory) for directory in own)]
        if not matches and found.stopped is None:
            unmatched.append(pattern)
        for source in matches:
            if source in seen:
                continue
            seen.add(source)
            if len(files) >= COLLECT_MAX_FILES:
                left_out += 1
                continue
            target = destination / os.path.normpath(source).lstrip("/")  # no `..` may lead the copy out
            files.append(_collect_one(pattern, source, target, exclude or destination, budget))
    if budget.stopping and budget.first_cap_bytes > budget.cap_bytes:
        notes.append(
            f"a stop signal came during the collection: from then on at most {human_size(budget.cap_bytes)}"
            f" of each file, and {_STOPPING_S:g}s more in all"
        )
    return Collection(str(destination), budget.first_cap_bytes, tuple(files), tuple(unmatched), left_out, tuple(notes))


def mark_predating(collection: Collection, started_at: float) -> Collection:
    """COLLECTION with each file last modified before STARTED_AT (the guide's start, epoch seconds) marked
    predates_run: it may be an earlier run's (ci.runner.predating)."""
    files = tuple(
        dataclasses.replace(f, predates_run=True)
        if f.modified_at is not None and predates(f.modified_at, started_at)
        else f
        for f in collection.files
    )
    return dataclasses.replace(collection, files=files)


class _Budget:
    """The collection's limits as they stand: each file's cap, the bytes left in all, when it must end.

    A stop request tightens them the first time check() sees it, whenever
    that is: before the collection, or between two files or chunks.
    """

    def __init__(
        self,
        cap_bytes: int,
        total_bytes: int,
        deadline: float | None,
        stop_requested: Callable[[], int | None] | None,
    ) -> None:
        self.cap_bytes = cap_bytes
        self.total_bytes = total_bytes
        self.bytes_left = total_bytes
        self.ends_by = deadline
        self.stop_requested = stop_requested
        self.stopping = False
        self.check()  # a stop requested before the collection applies from its start
        self.first_cap_bytes = self.cap_bytes  # the cap the collection reports; a stop request later lowers it

    def check(self) -> str | None:
        """Why the collection must stop now, or None; a stop request that has just come tightens the limits first."""
        if not self.stopping and self.stop_requested is not None and self.stop_requested() is not None:
            self.stopping = True
            self.cap_bytes = min(self.cap_bytes, _STOPPING_CAP_BYTES)
            ends_by = time.monotonic() + _STOPPING_S
            self.ends_by = ends_by if self.ends_by is None else min(self.ends_by, ends_by)
        if self.ends_by is not None and time.monotonic() >= self.ends_by:
            return _STOPPING if self.stopping else "the collection's time was up"
        return None

    def file_cap_bytes(self) -> int:
        """What one file may keep now: its cap, or what is left of the total."""
        return min(self.cap_bytes, max(self.bytes_left, 0))


def _collect_one(pattern: str, source: str, target: Path, within: Path, budget: _Budget) -> CollectedFile:
    """Copy one matched file, within the budget, and take its bytes from the total."""
    reason = budget.check()
    if reason is not None:
        return CollectedFile(pattern, source, None, 0, 0, False, f"not copied: {reason}")
    limited_by_total = budget.bytes_left < budget.cap_bytes
    copied = _copy_tail(pattern, source, target, within, budget)
    budget.bytes_left -= copied.copied_bytes
    if copied.truncated and limited_by_total:
        copied = _with_note(copied, f"the collection's {human_size(budget.total_bytes)} in all was used up")
    return copied


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
    return dataclasses.replace(copied, note=joined)


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


def _copy_tail(pattern: str, source: str, target: Path, within: Path, budget: _Budget) -> CollectedFile:
    """Copy the end of one file as it was when the copy started, to TARGET, a new file under WITHIN; say what went
    wrong instead of raising."""

    def failed(note: str, size_bytes: int = 0) -> CollectedFile:
        return CollectedFile(pattern, source, None, size_bytes, 0, False, f"not copied: {note}")

    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; it changes nothing for a regular file
        descriptor = open_without_foreign_links(source, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except ForeignLink as exc:
        return failed(f"{exc.strerror}: only links of this user or root are followed")
    except OSError as exc:
        return failed(f"cannot open it ({exc.strerror or exc})")
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            return failed(_kind(status.st_mode))
        size = status.st_size
        try:
            within.mkdir(parents=True, exist_ok=True)  # the output directory, as the user named it
            out = create_fresh(target, within=within)
        except OSError as exc:
            return failed(f"cannot write {target} ({exc.strerror or exc})", size)
        try:
            copy = _TailCopy(descriptor, out, size, budget)
            copy.run()
        finally:
            os.close(out)
        grown = os.fstat(descriptor).st_size
        if size and grown > size:
            copy.notes.append(f"it grew by {human_size(grown - size)} while copied; the copy ends where it ended then")
        copied = copy.position - copy.start
        truncated = copy.start > 0 or (size == 0 and copied >= copy.cap_bytes)
        if truncated and budget.stopping and copy.cap_bytes == budget.cap_bytes < budget.first_cap_bytes:
            copy.notes.append(f"only its last {human_size(copy.cap_bytes)} kept: {_STOPPING}")
        return CollectedFile(
            pattern,
            source,
            str(target),
            size or copied,
            copied,
            truncated,
            "; ".join(copy.notes),
            modified_at=status.st_mtime,
        )
    finally:
        os.close(descriptor)


class _TailCopy:
    """The copy of one file's end, chunk by chunk, asking the budget before each chunk."""

    def __init__(self, descriptor: int, out: int, size: int, budget: _Budget) -> None:
        self.descriptor, self.out, self.size, self.budget = descriptor, out, size, budget
        self.cap_bytes = budget.file_cap_bytes()
        # a file claiming size 0 may still have content (/proc, /sys): read it from the start, up to the cap
        self.start, self.end = (max(0, size - self.cap_bytes), size) if size else (0, self.cap_bytes)
        self.position = self.start
        self.notes: list[str] = []

    def run(self) -> None:
        """Copy from start to end, unless time is up, the file shrinks or an error stops it (each said in notes)."""
        try:
            while self.position < self.end:
                reason = self.budget.check()
                if reason is not None:
                    self.notes.append(f"cut short: {reason}")
                    return
                self._tighten()
                chunk = os.pread(self.descriptor, min(_CHUNK_BYTES, self.end - self.position), self.position)
                if not chunk:
                    if self.size:
                        self.notes.append(f"it shrank to {human_size(self.position)} while copied")
                    return
                os.write(self.out, chunk)
                self.position += len(chunk)
        except OSError as exc:
            self.notes.append(f"copy stopped at {human_size(self.position - self.start)}: {exc.strerror or exc}")

    def _tighten(self) -> None:
        """A stop request that came during this copy: keep the file's last bytes up to the new cap, its most telling."""
        cap_bytes = min(self.cap_bytes, self.budget.cap_bytes)
        if cap_bytes >= self.cap_bytes:
            return
        self.cap_bytes = cap_bytes
        if not self.size:
            self.end = max(self.position, min(self.end, cap_bytes))
        elif self.position < self.end - cap_bytes:
            # what was copied lies before the part now kept: start the copy again there
            os.ftruncate(self.out, 0)
            os.lseek(self.out, 0, os.SEEK_SET)
            self.start = self.position = self.end - cap_bytes
