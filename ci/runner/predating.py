"""Files that predate the run: a collected log, or one a diagnostic reads, last written before the guide started.

Guides keep server logs at fixed paths (`/tmp/server.log`); a server that
never started this time leaves last night's log there, and a report showing
it without a word misleads. The harness cannot know what a diagnostic
command reads; it looks at the words of the command that name existing
regular files (`tail -n 50 /tmp/server.log`, `cat logs/*.log`), which is
what diagnostics mostly are.
"""

from __future__ import annotations

import glob
import os
import shlex
import stat

from ci.record.outcome import PredatingFile

__all__ = ["PREDATING_MARGIN_S", "files_named", "predates", "predating_files"]

# a file written by a block just after the guide started may carry an mtime a little before it: the kernel stamps
# files from a coarse clock, and some file systems keep 2 s steps (FAT); a file older than this is not the run's
PREDATING_MARGIN_S = 2.0
_MOST_FILES = 20  # files one command's words may name that are looked at: a glob like /var/log/* stays cheap


def predates(modified_at: float, started_at: float) -> bool:
    """Whether a file last modified at MODIFIED_AT (epoch seconds) was written before a guide started at STARTED_AT."""
    return modified_at < started_at - PREDATING_MARGIN_S


def files_named(command: str, workdir: str, home: str | None = None) -> list[str]:
    """The existing regular files a bash command's words name, as absolute paths, each once, in order.

    A word is a path when it holds a `/` or names a file in WORKDIR; `~`
    is HOME; a word with `*`, `?` or `[` is a glob (its first matches only).
    Options, redirections and words that name nothing are passed over.
    """
    # punctuation apart: `a.log;`, `<file` and `2>/dev/null` name a.log, file and /dev/null
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: the words as they stand
        words = command.split()
    found: list[str] = []
    for word in words:
        if not word or word.startswith("-"):
            continue
        if word == "~" or word.startswith("~/"):
            word = (home or os.environ.get("HOME") or os.path.expanduser("~")) + word[1:]
        if glob.has_magic(word):  # the working directory's own name matches literally
            candidates = glob.glob(word if os.path.isabs(word) else os.path.join(glob.escape(workdir), word))
            candidates = sorted(candidates)[:_MOST_FILES]
        else:
            candidates = [word if os.path.isabs(word) else os.path.join(workdir, word)]
        for candidate in candidates:
            if candidate not in found and _is_file(candidate):
                found.append(candidate)
        if len(found) >= _MOST_FILES:
            break
    return found[:_MOST_FILES]


def predating_files(paths: list[str], started_at: float) -> tuple[PredatingFile, ...]:
    """Of PATHS, those last modified before the guide started at STARTED_AT (epoch seconds), with when."""
    older: list[PredatingFile] = []
    for path in paths:
        try:
            modified_at = os.stat(path).st_mtime
        except OSError:
            continue
        if predates(modified_at, started_at):
            older.append(PredatingFile(path, modified_at))
    return tuple(older)


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
