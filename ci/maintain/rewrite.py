"""Rewriting a guide's text: lines with their own endings, a fence's body replaced, every other byte kept, and
whether a body rewritten from a run may be published at all (no secret, no byte a guide cannot hold)."""

from __future__ import annotations

import os
import re

from ci.base.text import MASK, is_secret_name, policy
from ci.guide.model import value_sha256
from ci.maintain.realign import CannotRewrite
from ci.record.outcome import BlockResult

__all__ = ["MAX_BODY_BYTES", "SourceLines", "unpublishable"]


class SourceLines:
    """A guide's text as lines with their own endings, so edits leave every other byte alone."""

    _SPLIT = re.compile(r"(\r\n|\r|\n)")  # the line breaks markdown-it counts

    def __init__(self, text: str) -> None:
        parts = self._SPLIT.split(text)
        self.lines = parts[0::2]  # content of line N+1 at index N
        self.endings = [*parts[1::2], ""]

    def text(self) -> str:
        return "".join(line + ending for line, ending in zip(self.lines, self.endings, strict=True))

    def replace_body(self, fence_line: int, old_body: str, new_body: str) -> None:
        """Put `new_body` in place of the body of the fence opening at `fence_line` (1-based).

        CannotRewrite when the body cannot be located safely or the new body
        would end the fence early.
        """
        opening = fence_line - 1
        fence = re.search(r"`{3,}|~{3,}", self.lines[opening])
        if fence is None:
            raise CannotRewrite(f"line {fence_line} opens no fence")
        old_lines = old_body.split("\n") if old_body else []
        prefixes = []
        for offset, content in enumerate(old_lines):
            index = opening + 1 + offset
            if index >= len(self.lines) or not self.lines[index].endswith(content):
                raise CannotRewrite(f"the body of the fence at line {fence_line} does not sit where the parser saw it")
            prefixes.append(self.lines[index][: len(self.lines[index]) - len(content)])
        closing = opening + 1 + len(old_lines)
        while closing < len(self.lines) and not self.lines[closing].strip(" \t>"):
            closing += 1
        run = fence.group(0)
        closes = re.compile(rf"[ \t>]*{re.escape(run[0])}{{{len(run)},}}[ \t]*")
        if closing >= len(self.lines) or not closes.fullmatch(self.lines[closing]):
            raise CannotRewrite(f"the fence at line {fence_line} is not closed")
        early = re.compile(rf" {{0,3}}{re.escape(run[0])}{{{len(run)},}}[ \t]*")
        new_lines = new_body.split("\n") if new_body else []
        if any(early.fullmatch(line) for line in new_lines):
            raise CannotRewrite(f"the new output holds a line that would close the fence ({run}); use a longer fence")
        written = [p for p, content in zip(prefixes, old_lines, strict=True) if content]
        prefix = written[0] if written else re.sub(r"[^>\s]", " ", self.lines[opening][: fence.start()])
        ending = self.endings[opening] or "\n"
        start = opening + 1
        self.lines[start : start + len(old_lines)] = [prefix + line if line else prefix.rstrip() for line in new_lines]
        self.endings[start : start + len(old_lines)] = [ending] * len(new_lines)


MAX_BODY_BYTES = 1024 * 1024  # an expected body larger than this does not belong in a guide


def _masked_since(block: BlockResult) -> bool:
    """Whether the block's stdout file is smaller than what it wrote: --mask-files replaced a secret by *** in it."""
    try:
        size = os.stat(block.stdout_path).st_size if block.stdout_path is not None else 0
    except OSError:
        return False
    return size < block.stdout_bytes


def unpublishable(new_body: str, block: BlockResult) -> str | None:
    """Why NEW_BODY, expected output taken from BLOCK's stdout, is not put in the guide, ending `left alone` and the
    fix if there is one; None when it can be."""
    wildcard = "left alone (match that part with a wildcard)"
    if "\r" in new_body or "\0" in new_body:  # Markdown reads CR as a line break, NUL as U+FFFD
        return f"the output holds a carriage return (CR) or a NUL byte, which a Markdown code block cannot hold; {wildcard}"
    unknown = [
        name
        for name, digest in block.loaded_sha256.items()
        if is_secret_name(name) and all(value_sha256(name, value) != digest for value in policy().values)
    ]
    if unknown:  # its output may hold a secret this update cannot mask
        return (
            f"the block loaded {', '.join(unknown)}, secret by its name, whose value this update is not given, so"
            f" the new expected body could hold it unmasked: give the value (the environment, or --set"
            f" {unknown[0]}=...) and update again; left alone"
        )
    if policy().holds_secret(new_body):  # a guide is published: no form of a secret the block printed goes in
        return "the new expected body would hold a secret value the block printed; left alone"
    if MASK in new_body and _masked_since(block):
        return (
            f"the run's output file was masked (--mask-files), and the new expected body would hold {MASK} where the"
            f" block printed a secret value, which no later run prints; {wildcard}"
        )
    if len(new_body.encode("utf-8")) > MAX_BODY_BYTES:
        return f"the new expected body would hold over {MAX_BODY_BYTES} bytes; left alone"
    return None
