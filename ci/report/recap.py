"""A block that did not pass in one line: the same in the job log's recap and in the rehearsal's report."""

from __future__ import annotations

from ci.core.text import NO_SECRETS, Masker, clean_text

__all__ = ["MESSAGE_CHARS", "did_not_pass_line", "did_not_pass_parts", "with_reason"]

MESSAGE_CHARS = 200  # a line quotes at most this much of the block's message (its reason is bounded already)


def with_reason(message: str, reason: str | None) -> str:
    """`exit 1: server never became ready`: a block's message, then its reason when it has one."""
    return f"{message}: {reason}" if reason else message


def _one_line(text: str, masker: Masker, limit_chars: int | None = None) -> str:
    """TEXT's first line, cleaned and masked, then cut: masked before it is cut, so that no cut shows part of a secret."""
    line = clean_text(text, masker).strip().split("\n")[0]
    return line if limit_chars is None or len(line) <= limit_chars else line[:limit_chars] + " [...]"


def did_not_pass_parts(
    *, status: str, name: str, where: str, message: str, reason: str | None, masker: Masker = NO_SECRETS
) -> tuple[str, str, str]:
    """The line around its status word: `  `, `FAILED`, ` serve at guide.md:126: exit 1: server never became ready`.

    STATUS is a Status's value (`timed_out`), NAME the block's (id, else store, else `#ORDINAL`), WHERE the
    `file:line` its failure is blamed on, MESSAGE and REASON as BlockResult and results.json hold them.
    """
    message = _one_line(message, masker, MESSAGE_CHARS)
    reason = _one_line(reason, masker) if reason else None
    return "  ", status.upper(), f" {name} at {where}: {with_reason(message, reason)}"


def did_not_pass_line(
    *, status: str, name: str, where: str, message: str, reason: str | None, masker: Masker = NO_SECRETS
) -> str:
    """`  FAILED serve at guide.md:126: exit 1: server never became ready` (see did_not_pass_parts)."""
    parts = did_not_pass_parts(status=status, name=name, where=where, message=message, reason=reason, masker=masker)
    return "".join(parts)
