"""Where a run's outputs go: its reports, checked before anything runs (never onto a guide, another report or the
blocks' files), and the temporary output directories of a run given no --output-dir (one parent, the oldest pruned)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.base import frozen, lazy_import
from ci.base.files import os_error_text
from ci.base.signals import PID_FILE
from ci.runner.actions_files import PRIVATE_DIR

if TYPE_CHECKING:
    import tempfile
else:
    tempfile = lazy_import("tempfile")  # only a run without --output-dir makes one

__all__ = [
    "HARNESS_DIRECTORIES",
    "HARNESS_FILES",
    "KEEP_NEWEST",
    "PARENT_NAME",
    "UNTOUCHED_FOR_S",
    "TemporaryOutputs",
    "make_temporary_outputs",
    "report_path_problem",
]

HARNESS_FILES = ("results.json", PID_FILE)  # the run's own files at the top of the output directory
# and its own directories there: everything in them is the run's (actions-files/: made afresh when it starts)
HARNESS_DIRECTORIES = ("blocks", "collected", PRIVATE_DIR)


def _same(one: str, other: str) -> bool:
    """Whether two paths name one file: the same real path, or the same file under two names (a hard link)."""
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _inside(path: str, directory: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return real == top or real.startswith(top.rstrip("/") + "/")


def _harness_place(path: str, output_dir: str) -> str | None:
    """What of the run's own PATH would be in OUTPUT_DIR (`its results.json`, `its blocks/`), or None."""
    for name in HARNESS_FILES:
        if _same(path, os.path.join(output_dir, name)):
            return f"the output directory's {name}"
    for name in HARNESS_DIRECTORIES:
        if _inside(path, os.path.join(output_dir, name)):
            return f"inside the output directory's {name}/"
    return None


def report_path_problem(guides: Sequence[str], output_dir: str | None, junit: str | None, workdir: str) -> str | None:
    """Why the reports cannot go where the command line says, or None.

    GUIDES are the local guides (URLs left out); OUTPUT_DIR is --output-dir
    (None: a new temporary directory), JUNIT --junit, WORKDIR the blocks'
    working directory. Refused: --junit onto a guide or onto a file of the
    output directory's own; a guide among the output directory's own files;
    --workdir that is the output directory, or inside its blocks/,
    collected/ or actions-files/ (a block's files would mix with the run's,
    or be masked).
    """
    if junit is not None:
        for guide in guides:
            if _same(junit, guide):
                return f"--junit {junit!r} is the guide {guide!r}: the report would replace it; name another file, e.g. junit.xml"
        place = _harness_place(junit, output_dir) if output_dir is not None else None
        if place is not None:
            return f"--junit {junit!r} is {place}, which the run writes itself; name a file of its own, e.g. {os.path.join(output_dir or '', 'junit.xml')}"
    if output_dir is None:
        return None
    for guide in guides:
        place = _harness_place(guide, output_dir)
        if place is not None:
            return (
                f"the guide {guide!r} is {place}, which the run replaces; move the guide or name another --output-dir"
            )
    if _same(workdir, output_dir):
        return (
            f"--output-dir {output_dir!r} is the working directory of the blocks (--workdir): their files would mix"
            " with the run's reports; name a directory of its own for --output-dir, e.g. guide-guard-output"
        )
    for name in HARNESS_DIRECTORIES:
        if _inside(workdir, os.path.join(output_dir, name)):
            return f"--workdir {workdir!r} is inside the output directory's {name}/, which the run replaces; name another --workdir"
    return None


# Every such directory is made under $TMPDIR/guide-guard/ (tempfile.gettempdir()), as run-XXXXXXXX or
# rehearsal-XXXXXXXX, and kept: the paths the log printed stay good. Each new one prunes the parent: a
# directory goes when it is not among the KEEP_NEWEST newest (by last change), has not changed for
# UNTOUCHED_FOR_S, and no run holds it. A run holds its output directory with flock for its whole length
# (ci.run.session), so one of many hours is never pruned; the hour covers the moment between a directory's
# making and its lock, and a rehearsal building its sandbox before its run starts. Prunes take turns (a flock on
# the parent), so that two runs started together remove no more than one would.


PARENT_NAME = "guide-guard"  # under tempfile.gettempdir()
KEEP_NEWEST = 10  # directories kept whatever their age, the new one included
UNTOUCHED_FOR_S = 3600.0  # a directory changed more recently than this is kept too
PRUNE_WAIT_S = 30.0  # how long a prune waits for another one to end before it goes on alone
_KINDS = ("run", "rehearsal")  # the prefixes of the directories this module makes, and the only ones it prunes


@frozen
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
