"""Where a run's reports go, checked before anything runs: never onto a guide, another report or the blocks' files."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ci.pidfile import PID_FILE
from ci.runner.actions_files import PRIVATE_DIR

__all__ = ["HARNESS_DIRECTORIES", "HARNESS_FILES", "report_path_problem"]

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
