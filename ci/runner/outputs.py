"""Block output files: their names under OUTPUT_DIR/blocks, made ahead of time and given back when left empty."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from ci.base.files import create_fresh, remove_within, rename_within
from ci.guide.model import Step

__all__ = ["OutputFiles", "file_sizes", "output_paths", "output_stem", "slug"]


def slug(text: str) -> str:
    """Text as a file name part: letters, digits, `_.-`, at most 60 characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "block"


def output_stem(output_dir: Path, prefix: str, step: Step) -> str:
    """OUTPUT_DIR/blocks/[PREFIX]NNN-name: a block's .stdout.txt, .stderr.txt (or merged .output.txt), .dumps/ and
    .diagnostics/ sit beside each other."""
    return f"{output_dir}/blocks/{prefix}{step.ordinal:03d}-{slug(step.name)}"


def output_paths(stem: str, merged: bool = False) -> tuple[Path, Path]:
    """The stdout and stderr files of the block with this stem; MERGED (its stderr goes to its stdout file):
    STEM.output.txt, its whole output, and a stderr file it is never given, made and removed empty."""
    return Path(f"{stem}.output.txt" if merged else f"{stem}.stdout.txt"), Path(f"{stem}.stderr.txt")


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
    """Makes each block's output files ahead of time, while the block before it runs, and holds them open.

    Creating a file can cost more than a whole trivial block on some file
    systems (it is the allocation of an inode, not the name); the harness is
    only waiting while a block runs, so the next block's files are made then,
    on the other core, instead of in the spawn that the run waits for. Each is
    made new (`create_fresh`): a link or a FIFO left at its name is replaced,
    never written through, and the block writes to the descriptor made here.
    A stream that a block left empty keeps no file of its own: once nothing of
    its process group is left that could still write to it, its file is
    renamed to serve a later block (a rename is cheap). Files made for blocks
    that never ran are removed at the end.
    """

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir  # every file is made below it, through real directories only
        self.spare: list[tuple[Path, int]] = []  # empty files of finished blocks, free to rename, with descriptors
        self.made: dict[Path, int] = {}  # made ahead for blocks that have not run yet
        self.held: dict[Path, int] = {}  # of blocks started: closed once the block is judged

    def prepare(self, *paths: Path) -> None:
        for path in paths:
            if path in self.made or path in self.held:
                continue
            with contextlib.suppress(OSError):  # said when the block starts: descriptor() makes it then, or raises
                self.made[path] = self._make(path)

    def _make(self, path: Path) -> int:
        # PATH may be a spare itself (a retried block's stream left empty by its last attempt): taken as it is,
        # since renaming another spare over it would leave that one's descriptor on a file no name reaches
        for index, (old, descriptor) in enumerate(self.spare):
            if old == path:
                del self.spare[index]
                return descriptor
        while self.spare:
            old, descriptor = self.spare.pop()
            try:
                rename_within(old, path, within=self.output_dir)
            except OSError:
                os.close(descriptor)
                continue
            return descriptor
        return create_fresh(path, within=self.output_dir)

    def descriptor(self, path: Path) -> int:
        """The descriptor a block's stream goes to, held until the block is judged; OSError when it cannot be made."""
        descriptor = self.made.pop(path, None)
        if descriptor is None:
            descriptor = self.held.get(path)
        if descriptor is None:
            descriptor = self._make(path)
        self.held[path] = descriptor
        return descriptor

    def used(self, *paths: Path) -> None:
        for path in paths:
            if path in self.made:
                self.held[path] = self.made.pop(path)

    def take_back(self, path: Path, size_bytes: int, writers_left: bool) -> bool:
        """Keep an empty stream's file for later; True when it was taken."""
        descriptor = self.held.pop(path, None)
        if size_bytes or writers_left or descriptor is None:
            if descriptor is not None:
                os.close(descriptor)
            return False
        self.spare.append((path, descriptor))
        return True

    def remove_unused(self) -> None:
        for path, descriptor in [*self.spare, *self.made.items()]:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                remove_within(path, within=self.output_dir)
        for descriptor in self.held.values():
            os.close(descriptor)
        self.spare.clear()
        self.made.clear()
        self.held.clear()
