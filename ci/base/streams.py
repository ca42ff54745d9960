"""The stream files of a block read back within bounds: a view of their head and tail, a scan for markers."""

from __future__ import annotations

import os

from ci.base import frozen
from ci.base.text import (
    HEAD_BYTES,
    HEAD_LINES,
    MARKER_SCAN_BYTES,
    NO_SECRETS,
    TAIL_BYTES,
    TAIL_LINES,
    Masker,
    clean_unmasked,
    human_size,
    policy,
)

__all__ = ["BLANK_SCAN_BYTES", "OutputView", "file_contains", "is_blank", "read_head", "read_tail", "read_view"]

BLANK_SCAN_BYTES = 64 * 1024  # a stream longer than this is not read to see whether it is blank: it is not


@frozen
class OutputView:
    """What a reporter shows of one stream: all of it, or its head and tail."""

    head: str  # the whole text when complete
    tail: str  # empty when complete
    size_bytes: int
    complete: bool

    def render(self) -> str:
        if self.complete:
            return self.head
        omitted = self.size_bytes - len(self.head.encode()) - len(self.tail.encode())
        return f"{self.head}\n[... {human_size(max(omitted, 0))} omitted; the whole stream is on disk ...]\n{self.tail}"


def read_view(
    path: str | None,
    *,
    full_limit_bytes: int = HEAD_BYTES + TAIL_BYTES,
    masker: Masker | None = None,
    mask: bool = True,
    keep_hidden: bool = False,
) -> OutputView:
    """Read a stream file into a bounded view (memory stays small whatever its size), cleaned and masked by the
    run's policy (or MASKER).

    With `mask=False` the secrets are kept (a view to match against
    what the guide expects), but no cut falls inside one all the same. With
    `keep_hidden=True` the view is not cleaned either: it is the text as
    decoded, for a mismatch view to show what a log would hide.
    """
    masker = policy() if masker is None else masker
    masker_shown = masker if mask else NO_SECRETS
    try:
        size = os.stat(path).st_size if path is not None else 0
    except FileNotFoundError:
        size = 0
    if path is None or size == 0:
        return OutputView("", "", 0, True)

    def tidy(raw: bytes) -> str:
        text = raw.decode("utf-8", "replace")
        return text if keep_hidden else clean_unmasked(text)

    # a secret straddling a cut is read whole on both sides, so that the cut can avoid it
    around = masker.longest_bytes
    with open(path, "rb") as handle:
        # never past the size seen: a process the block left may still be writing (or growing the file sparse)
        if size <= full_limit_bytes:
            return OutputView(masker_shown.mask(tidy(handle.read(size))).rstrip("\n"), "", size, True)
        head_raw = handle.read(HEAD_BYTES + around)
        tail_start = max(size - TAIL_BYTES, HEAD_BYTES)
        handle.seek(max(tail_start - around, HEAD_BYTES))
        tail_raw = handle.read(size - handle.tell())
    head_text = tidy(head_raw)
    head_cut = masker.clear_cut(head_text, len(tidy(head_raw[:HEAD_BYTES])))
    head_lines = masker_shown.mask(head_text[:head_cut]).split("\n")[:HEAD_LINES]
    tail_text = tidy(tail_raw)
    tail_cut = len(tail_text) - len(tidy(tail_raw[-(size - tail_start) :]))
    tail_lines = (
        masker_shown.mask(tail_text[masker.clear_cut(tail_text, tail_cut, forward=True) :]).rstrip("\n").split("\n")
    )
    # the first tail line is probably cut in the middle; drop it unless it is all we have
    tail_lines = tail_lines[1:] if len(tail_lines) > 1 else tail_lines
    return OutputView("\n".join(head_lines), "\n".join(tail_lines[-TAIL_LINES:]), size, False)


def read_tail(path: str | None, limit_bytes: int, masker: Masker | None = None) -> str:
    """The last LIMIT_BYTES of a stream file, decoded ("" for none): only they are read, whatever its size.

    It starts at a line's start: a line the cut falls in is left out, unless
    it is the only one (a line longer than LIMIT_BYTES), which then starts
    past any of the run's secrets (the policy's, or MASKER's) the cut falls
    inside, so that masking what is read leaves no part of one. Not cleaned
    nor masked.
    """
    masker = policy() if masker is None else masker
    try:
        size = os.stat(path).st_size if path is not None else 0
    except FileNotFoundError:
        return ""
    if path is None or size == 0:
        return ""
    start = max(size - limit_bytes, 0)
    # read before the cut: the byte there says whether a line starts at it, and a secret may straddle it
    around = min(max(masker.longest_bytes, 1), start)
    with open(path, "rb") as handle:
        handle.seek(start - around)
        # never past the size seen: a process the block left may still be writing
        raw = handle.read(size - start + around)
    text = raw.decode("utf-8", "replace")
    if start == 0:
        return text
    cut = len(raw[:around].decode("utf-8", "replace"))
    line_start = text.find("\n", cut - 1)
    if line_start != -1 and line_start + 1 < len(text):
        return text[line_start + 1 :]
    return text[masker.clear_cut(text, cut, forward=True) :]


def read_head(path: str | os.PathLike[str], limit_bytes: int) -> tuple[str, int, bool]:
    """A file's first LIMIT_BYTES as UTF-8 (invalid bytes replaced), its size, and whether the text is the file
    exactly (not cut, valid UTF-8). A cut never falls inside one of the run's secrets (the policy's): it moves
    back to the secret's start, so that masking the text shows no part of one."""
    masker = policy()
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        raw = handle.read(limit_bytes + masker.longest_bytes)
    cut = size > limit_bytes
    try:
        text, exact = raw.decode("utf-8"), not cut
    except UnicodeDecodeError:
        text, exact = raw.decode("utf-8", "replace"), False
    if cut:
        text = text[: masker.clear_cut(text, len(raw[:limit_bytes].decode("utf-8", "replace")))]
    return text, size, exact


def is_blank(path: str | None, size_bytes: int) -> bool:
    """Whether a stream file of SIZE_BYTES holds nothing but blanks (spaces, tabs, line ends): True for none or an
    empty one. One over BLANK_SCAN_BYTES is not read and counts as not blank: a block printing a megabyte of empty
    lines printed something to look at."""
    if path is None or size_bytes == 0:
        return True
    if size_bytes > BLANK_SCAN_BYTES:
        return False
    try:
        with open(path, "rb") as handle:
            return not handle.read(BLANK_SCAN_BYTES + 1).strip()
    except FileNotFoundError:
        return True


def file_contains(
    path: str | None, needles: tuple[str, ...], chunk_bytes: int = 1 << 20, scan_bytes: int = MARKER_SCAN_BYTES
) -> str | None:
    """The first needle found in a file's first and last SCAN_BYTES (read in chunks), else None.

    The middle of a larger file is not read: a block can make its stderr
    gigabytes long (sparse) at no cost to itself, and scanning it all would
    hold the run up for minutes. Markers sit where a reader looks, at the
    start (what went wrong first) and at the end (the traceback).
    """
    try:
        size = os.stat(path).st_size if path else 0
    except FileNotFoundError:
        return None
    if not path or not needles or size == 0:
        return None
    encoded = [(n, n.encode("utf-8")) for n in needles if n]
    overlap = max((len(b) for _, b in encoded), default=1) - 1
    spans = [(0, size)] if size <= 2 * scan_bytes else [(0, scan_bytes), (size - scan_bytes, size)]
    with open(path, "rb") as handle:
        for start, end in spans:
            handle.seek(start)
            carry = b""
            position = start
            while position < end:
                chunk = handle.read(min(chunk_bytes, end - position))
                if not chunk:
                    break
                position += len(chunk)
                window = carry + chunk
                for needle, raw in encoded:
                    if raw in window:
                        return needle
                carry = window[-overlap:] if overlap else b""
    return None
