"""Block output files: their names under OUTPUT_DIR/blocks, made ahead of time and given back when left empty."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from ci.core.model import Step

__all__ = ["OutputFiles", "file_sizes", "output_paths", "output_stem", "slug"]


def slug(text: str) -> str:
    """Text as a file name part: letters, digits, `_.-`, at most 60 characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "block"


def output_stem(output_dir: Path, prefix: str, step: Step) -> str:
    """OUTPUT_DIR/blocks/[PREFIX]NNN-name: a block's .stdout.txt, .stderr.txt, .dumps/ and .diagnostics/ sit beside each other."""
    return f"{output_dir}/blocks/{prefix}{step.ordinal:03d}-{slug(step.name)}"


def output_paths(stem: str) -> tuple[Path, Path]:
    """The stdout and stderr files of the block with this stem."""
    return Path(f"{stem}.stdout.txt"), Path(f"{stem}.stderr.txt")


def file_sizes(*paths: Path) -> tuple[int, ...]:
    """Each file's size in bytes; 0 for one that is not there."""
    sizes = []
    for path in paths:
        try:
            sizes.append(os.stat(path).st_size)
        except OSError:
            sizes.append(0)
    return tuple(sizes)


class OutputFiles:
    """Makes each block's output files ahead of time, while the block before it runs.

    Creating a file can cost more than a whole trivial block on some file
    systems (it is the allocation of an inode, not the name); the harness is
    only waiting while a block runs, so the next block's files are made then,
    on the other core, instead of in the spawn that the run waits for. A
    stream that a block left empty keeps no file of its own: once nothing of
    its process group is left that could still write to it, its file is
    renamed to serve a later block (a rename is cheap). Files made for blocks
    that never ran are removed at the end.
    """

    def __init__(self) -> None:
        self.spare: list[Path] = []  # empty files of finished blocks, free to rename
        self.made: set[Path] = set()  # made ahead for blocks that have not run yet

    def prepare(self, *paths: Path) -> None:
        for path in paths:
            if path in self.made:
                continue
            try:
                if self.spare:
                    os.rename(self.spare.pop(), path)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except OSError:
                continue  # (a file of an earlier run, say): the spawn opens it with O_TRUNC
            self.made.add(path)

    def used(self, *paths: Path) -> None:
        self.made.difference_update(paths)

    def take_back(self, path: Path, size_bytes: int, writers_left: bool) -> bool:
        """Keep an empty stream's file for later; True when it was taken."""
        if size_bytes or writers_left:
            return False
        self.spare.append(path)
        return True

    def remove_unused(self) -> None:
        for path in [*self.spare, *self.made]:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.spare.clear()
        self.made.clear()
