"""Whether an expected body rewritten from a run may go into a guide, which is published: no secret, no byte
a Markdown code block cannot hold, nothing a masked output file made up, nothing too large."""

from __future__ import annotations

from ci.core.text import MASK, Masker
from ci.record import RecordedBlock

__all__ = ["MAX_BODY_BYTES", "unpublishable"]

MAX_BODY_BYTES = 1024 * 1024  # an expected body larger than this does not belong in a guide


def _masked_since(block: RecordedBlock) -> bool:
    """Whether the block's stdout file is smaller than what it wrote: --mask-files replaced a secret by *** in it."""
    try:
        size = block.stdout_file.stat().st_size if block.stdout_file is not None else 0
    except OSError:
        return False
    return block.stdout_bytes is not None and size < block.stdout_bytes


def unpublishable(new_body: str, block: RecordedBlock, masker: Masker) -> str | None:
    """Why NEW_BODY, expected output taken from BLOCK's stdout, is not put in the guide, ending `left alone` and the
    fix if there is one; None when it can be."""
    wildcard = "left alone (match that part with a wildcard)"
    if "\r" in new_body or "\0" in new_body:  # Markdown reads CR as a line break, NUL as U+FFFD
        return f"the output holds a carriage return (CR) or a NUL byte, which a Markdown code block cannot hold; {wildcard}"
    if masker.holds_secret(new_body):  # a guide is published: no form of a secret the block printed goes in
        return "the new expected body would hold a secret value the block printed; left alone"
    if MASK in new_body and _masked_since(block):
        return (
            f"the run's output file was masked (--mask-files), and the new expected body would hold {MASK} where the"
            f" block printed a secret value, which no later run prints; {wildcard}"
        )
    if len(new_body.encode("utf-8")) > MAX_BODY_BYTES:
        return f"the new expected body would hold over {MAX_BODY_BYTES} bytes; left alone"
    return None
