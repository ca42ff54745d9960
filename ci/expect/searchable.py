"""An output as the matcher searches it: text in memory, a file's bytes, or a file's decoded text, a window at a time."""

from __future__ import annotations

import bisect
import codecs
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import AnyStr, BinaryIO, Generic

__all__ = ["WINDOW_BYTES", "DecodedFile", "FileBytes", "MemoryText", "Searchable", "find_in_chunks", "open_output"]

_FIRST_CHUNK_BYTES = 64 * 1024  # pieces usually sit close together: start small
WINDOW_BYTES = 1024 * 1024  # read at a time, at most; larger windows measured slower (bench/matching.py)
_LINE_REACH = 4096  # of the output's line around an offset, this much is read on each side


class Searchable(ABC, Generic[AnyStr]):
    """An output as the matcher searches it, in its own offsets (characters or bytes).

    Pieces are given as text and put in the output's form by `encode`.
    """

    size: int

    @abstractmethod
    def read(self, start: int, length: int) -> AnyStr:
        """What is at `start`, `length` long (less at the end)."""

    @abstractmethod
    def find_encoded(self, needle: AnyStr, start: int) -> int:
        """Offset of the first `needle` at or after `start`, else -1."""

    @abstractmethod
    def content_end(self) -> int:
        """Size without trailing newlines."""

    @abstractmethod
    def encode(self, piece: str) -> AnyStr:
        """A piece of an expected body in the output's form."""

    @abstractmethod
    def decode(self, raw: AnyStr) -> str:
        """A part of the output as text."""

    def length(self, piece: str) -> int:
        return len(self.encode(piece))

    def has_at(self, piece: str, start: int) -> bool:
        needle = self.encode(piece)
        return self.read(start, len(needle)) == needle

    def find(self, piece: str, start: int) -> int:
        """Offset of the first `piece` at or after `start`, else -1."""
        if not piece:
            return start if start <= self.size else -1
        return self.find_encoded(self.encode(piece), start)

    def count_lines(self, start: int, end: int) -> int:
        """How many newlines there are from `start` to `end`, read a window at a time."""
        newline = self.encode("\n")
        total = 0
        while start < end:
            chunk = self.read(start, min(end - start, WINDOW_BYTES))
            if not chunk:
                break
            total += chunk.count(newline)
            start += len(chunk)
        return total

    def line_around(self, offset: int) -> str:
        """The line holding `offset` (its newline left out), up to _LINE_REACH on each side."""
        before = self.decode(self.read(max(offset - _LINE_REACH, 0), min(offset, _LINE_REACH)))
        after = self.decode(self.read(offset, _LINE_REACH))
        return before.rpartition("\n")[2] + after.partition("\n")[0]


class MemoryText(Searchable[str]):
    """An output held in memory as text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.size = len(text)

    def read(self, start: int, length: int) -> str:
        return self.text[start : start + length]

    def find_encoded(self, needle: str, start: int) -> int:
        return self.text.find(needle, start)

    def content_end(self) -> int:
        return len(self.text.rstrip("\n"))

    def encode(self, piece: str) -> str:
        return piece

    def decode(self, raw: str) -> str:
        return raw


def find_in_chunks(chunks: Iterable[AnyStr], needle: AnyStr, start: int) -> int:
    """Offset of the first `needle` in the text that `chunks` give from `start` on, else -1; keeps little of it."""
    offset = start  # of buffer[0]
    buffer = needle[:0]
    keep = len(needle) - 1  # of a buffer searched in vain, the end that could begin a match
    for chunk in chunks:
        buffer += chunk
        found = buffer.find(needle)
        if found >= 0:
            return offset + found
        if len(buffer) > keep:
            offset += len(buffer) - keep
            buffer = buffer[len(buffer) - keep :] if keep else needle[:0]
    return -1


class FileBytes(Searchable[bytes]):
    """The bytes of a stdout file, searched in bounded windows so memory stays small.

    UTF-8 is self-synchronising, so a byte-level search of a piece finds
    exactly its matches in the decoded text, invalid bytes and all, as long as
    the piece holds no U+FFFD (which matches a replaced byte: `DecodedFile`).
    """

    def __init__(self, handle: BinaryIO, window_bytes: int) -> None:
        self.handle = handle
        self.size = os.fstat(handle.fileno()).st_size  # what a writer left running adds later is not read
        self.window_bytes = window_bytes

    def read(self, start: int, length: int) -> bytes:
        self.handle.seek(start)
        return self.handle.read(max(min(length, self.size - start), 0))

    def chunks(self, start: int) -> Iterator[bytes]:
        length = min(_FIRST_CHUNK_BYTES, self.window_bytes)
        while start < self.size:
            chunk = self.read(start, length)
            if not chunk:  # the file shrank meanwhile
                return
            yield chunk
            start += len(chunk)
            length = min(length * 2, self.window_bytes)

    def find_encoded(self, needle: bytes, start: int) -> int:
        return find_in_chunks(self.chunks(start), needle, start)

    def content_end(self) -> int:
        end = self.size
        while end > 0:
            chunk = self.read(max(end - self.window_bytes, 0), min(self.window_bytes, end))
            stripped = chunk.rstrip(b"\n")
            end -= len(chunk) - len(stripped)
            if stripped or not chunk:
                return end
        return 0

    def encode(self, piece: str) -> bytes:
        return piece.encode("utf-8")

    def decode(self, raw: bytes) -> str:
        return raw.decode("utf-8", errors="replace")


def _utf8_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


class DecodedFile(Searchable[str]):
    """A stdout file as text, decoded as UTF-8 with invalid bytes replaced, in character offsets.

    For a body holding U+FFFD, which matches a replaced invalid byte as well as
    a U+FFFD printed. Decoding window by window gives the characters decoding
    the whole file would. One pass learns the text's length, its trailing
    newlines, and at each window which byte starts which character; a read or
    a search decodes from the nearest such mark, so memory stays bounded.
    """

    def __init__(self, handle: BinaryIO, window_bytes: int) -> None:
        self.handle = handle
        self.window_bytes = window_bytes
        self.size_bytes = os.fstat(handle.fileno()).st_size  # what a writer left running adds later is not read
        self.mark_chars = [0]  # character offsets where decoding can start afresh ...
        self.mark_bytes = [0]  # ... at these byte offsets
        chars = trailing = 0
        for text, undecoded_at in self._decoded(0):
            chars += len(text)
            stripped = text.rstrip("\n")
            trailing = trailing + len(text) if not stripped else len(text) - len(stripped)
            self.mark_chars.append(chars)
            self.mark_bytes.append(undecoded_at)
        self.size = chars
        self.trailing = trailing

    def _decoded(self, offset: int) -> Iterator[tuple[str, int]]:
        """The text from byte `offset` (a character's start) on, a window at a time, each with where it ends.

        That is the byte offset up to which the file is decoded: a character
        the next window may complete starts there.
        """
        decoder = _utf8_decoder()
        self.handle.seek(offset)
        while True:
            raw = self.handle.read(max(min(self.window_bytes, self.size_bytes - offset), 0))
            offset += len(raw)
            text = decoder.decode(raw, final=not raw)
            pending, _ = decoder.getstate()
            yield text, offset - len(pending)
            if not raw:
                return

    def chunks(self, start: int) -> Iterator[str]:
        """The text from character `start` on, a window at a time."""
        mark = bisect.bisect_right(self.mark_chars, start) - 1
        skip = start - self.mark_chars[mark]
        for text, _ in self._decoded(self.mark_bytes[mark]):
            if skip:
                dropped = min(skip, len(text))
                text, skip = text[dropped:], skip - dropped
            if text:
                yield text

    def read(self, start: int, length: int) -> str:
        parts: list[str] = []
        wanted = length
        for text in self.chunks(start) if length > 0 else ():
            parts.append(text[:wanted])
            wanted -= len(parts[-1])
            if not wanted:
                break
        return "".join(parts)

    def find_encoded(self, needle: str, start: int) -> int:
        return find_in_chunks(self.chunks(start), needle, start)

    def content_end(self) -> int:
        return self.size - self.trailing

    def encode(self, piece: str) -> str:
        return piece

    def decode(self, raw: str) -> str:
        return raw


def open_output(handle: BinaryIO, body: str, window_bytes: int) -> FileBytes | DecodedFile:
    """The file as the body must be matched against it: bytes, or decoded text when the body holds U+FFFD."""
    if "\ufffd" in body:
        return DecodedFile(handle, window_bytes)
    return FileBytes(handle, window_bytes)
