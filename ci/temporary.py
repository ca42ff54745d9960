"""Temporary output directories (a run or a rehearsal given no --output-dir): one parent, the oldest pruned."""

# Every such directory is made under $TMPDIR/guide-guard/ (tempfile.gettempdir()), as run-XXXXXXXX or
# rehearsal-XXXXXXXX, and kept: the paths the log printed stay good. Each new one prunes the parent: a
# directory goes when it is not among the KEEP_NEWEST newest (by last change), has not changed for
# UNTOUCHED_FOR_S, and no run holds it. A run holds its output directory with flock for its whole length
# (ci.session), so one of many hours is never pruned; the hour covers the moment between a directory's
# making and its lock, and a rehearsal building its sandbox before its run starts. Prunes take turns (a flock on
# the parent), so that two runs started together remove no more than one would.

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ci.core.disk import os_error_text

__all__ = ["KEEP_NEWEST", "PARENT_NAME", "UNTOUCHED_FOR_S", "TemporaryOutputs", "make_temporary_outputs"]

PARENT_NAME = "guide-guard"  # under tempfile.gettempdir()
KEEP_NEWEST = 10  # directories kept whatever their age, the new one included
UNTOUCHED_FOR_S = 3600.0  # a directory changed more recently than this is kept too
PRUNE_WAIT_S = 30.0  # how long a prune waits for another one to end before it goes on alone
_KINDS = ("run", "rehearsal")  # the prefixes of the directories this module makes, and the only ones it prunes


@dataclasses.dataclass(frozen=True)
class TemporaryOutputs:
    """A new temporary output directory, and what the user should hear about its making."""

    path: Path  # the new, empty directory (mode 0o700)
    warnings: tuple[str, ...]  # why it is not under the shared parent; earlier directories that could not go


def make_temporary_outputs(kind: str) -> TemporaryOutputs:
    """A new directory for a KIND ("run" or "rehearsal") under $TMPDIR/guide-guard/, after pruning the oldest there.

    Where that parent cannot be used (another user's, writable by others, not a directory), the directory is
    a plain `guide-guard-KIND-*` in $TMPDIR, and a warning says why. OSError when no directory can be made.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown kind of temporary directory: {kind!r}")
    base = Path(tempfile.gettempdir())
    warnings = _tmpdir_passed_over(base)
    parent = base / PARENT_NAME
    refusal = _parent_refusal(parent)
    if refusal is not None:
        path = Path(tempfile.mkdtemp(prefix=f"{PARENT_NAME}-{kind}-", dir=base))
        return TemporaryOutputs(path, (*warnings, f"temporary outputs are in {path}, not under {parent}: {refusal}"))
    path = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=parent))
    left = _prune(parent, keep=path.name)
    if left:
        shown = "; ".join(left[:3]) + (f"; and {len(left) - 3} more" if len(left) > 3 else "")
        warnings += (
            f"{len(left)} earlier temporary output director{'y' if len(left) == 1 else 'ies'} under {parent}"
            f" could not be removed ({shown}): remove {'it' if len(left) == 1 else 'them'} by hand"
            " (as the user who owns what is left in it, or root)",
        )
    return TemporaryOutputs(path, warnings)


def _tmpdir_passed_over(base: Path) -> tuple[str, ...]:
    """A warning when $TMPDIR names a directory other than BASE: Python's tempfile passes over one it cannot make
    a file in (gone, read-only, a full disk) for /tmp, /var/tmp or even the current directory, without a word."""
    wanted = os.environ.get("TMPDIR")
    if not wanted or os.path.realpath(wanted) == os.path.realpath(base):
        return ()
    if not os.path.isdir(wanted):
        why = "it is not a directory" if os.path.lexists(wanted) else "it does not exist"
    elif not os.access(wanted, os.W_OK | os.X_OK):
        why = "it is not writable"
    else:
        why = "no file could be made in it (a full disk?)"
    return (f"TMPDIR={wanted} cannot be used ({why}), so temporary outputs go under {base}: fix TMPDIR",)


def _parent_refusal(parent: Path) -> str | None:
    """Make PARENT when missing (mode 0o700, less what the umask takes); why it cannot be used, or None."""
    try:
        os.mkdir(parent, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"it cannot be made ({os_error_text(exc, parent)})"
    try:
        info = os.lstat(parent)
    except OSError as exc:
        return f"it cannot be read ({os_error_text(exc, parent)})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory (a symbolic link or a file is there)"
    if info.st_uid != os.geteuid():
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"others may write in it (mode {stat.S_IMODE(info.st_mode):o}); make it 0700 or remove it"
    if not os.access(parent, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def _prune(parent: Path, *, keep: str) -> list[str]:
    """Remove what is past its time under PARENT (never KEEP); what could not be removed, and why.

    One prune at a time (a flock on PARENT): removing a directory's contents makes it look newly changed, so a
    prune that looked while another was removing would count that directory among the newest and remove one
    more than its share.
    """
    with _one_at_a_time(parent):
        return _prune_alone(parent, keep=keep)


@contextlib.contextmanager
def _one_at_a_time(parent: Path) -> Iterator[None]:
    """Hold PARENT's flock, waiting up to PRUNE_WAIT_S for another prune to end; without it after that, or when
    PARENT cannot be opened (a prune is tidying, never a reason for a run not to start)."""
    try:
        descriptor = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + PRUNE_WAIT_S
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            except OSError:
                break
        yield
    finally:
        os.close(descriptor)  # the lock goes with it


def _prune_alone(parent: Path, *, keep: str) -> list[str]:
    """_prune's work, while no other prune runs."""
    found: list[tuple[float, str]] = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            if entry.name == keep or not entry.name.startswith(tuple(f"{kind}-" for kind in _KINDS)):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    found.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
    found.sort(reverse=True)
    now = time.time()
    left = []
    for changed, name in found[KEEP_NEWEST - 1 :]:  # the new directory is the first of the newest
        if now - changed < UNTOUCHED_FOR_S:
            continue
        problem = _remove_unless_held(parent / name)
        if problem is not None:
            left.append(problem)
    return left


def _remove_unless_held(path: Path) -> str | None:
    """Remove PATH unless a run holds it (its flock); why it could not be removed, or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:  # another run pruned it first
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a run is using it right now
        # held while it goes: a run started with --output-dir on it waits no more than this
        failures = _remove_tree(path)
    finally:
        os.close(descriptor)
    if failures and os.path.lexists(path):
        return f"{path}: {failures[0].strerror or failures[0]}"
    return None


def _remove_tree(path: Path) -> list[OSError]:
    """Remove what can be removed of PATH; the errors met on the way."""
    failures: list[BaseException] = []
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _function, _path, error: failures.append(error))
    else:  # onerror: deprecated from 3.12 on, the only way before it
        shutil.rmtree(path, onerror=lambda _function, _path, info: failures.append(info[1]))
    return [failure for failure in failures if isinstance(failure, OSError)]
