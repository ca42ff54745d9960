"""One-line summaries: a block that did not pass (the job log's recap, the rehearsal's report), and a guide's
blocks counted by status (the verdict line, the step summary)."""

from __future__ import annotations

from collections.abc import Iterable

from ci.base.text import clean_text, plural
from ci.guide.model import Status
from ci.record.outcome import BlockResult

__all__ = [
    "MESSAGE_CHARS",
    "block_tally",
    "did_not_pass_line",
    "did_not_pass_parts",
    "status_counts",
    "status_tally",
    "with_reason",
]

MESSAGE_CHARS = 200  # a line quotes at most this much of the block's message (its reason is bounded already)


def with_reason(message: str, reason: str | None) -> str:
    """`exit 1: server never became ready`: a block's message, then its reason when it has one."""
    return f"{message}: {reason}" if reason else message


def _one_line(text: str, limit_chars: int | None = None) -> str:
    """TEXT's first line, cleaned and masked (the run's policy), then cut: masked before it is cut, so that no cut
    shows part of a secret."""
    line = clean_text(text).strip().split("\n")[0]
    return line if limit_chars is None or len(line) <= limit_chars else line[:limit_chars] + " [...]"


def did_not_pass_parts(*, status: str, name: str, where: str, message: str, reason: str | None) -> tuple[str, str, str]:
    """The line around its status word: `  `, `FAILED`, ` serve at guide.md:126: exit 1: server never became ready`.

    STATUS is a Status's value (`timed_out`), NAME the block's (id, else store, else `#ORDINAL`), WHERE the
    `file:line` its failure is blamed on, MESSAGE and REASON as BlockResult and results.json hold them.
    """
    message = _one_line(message, MESSAGE_CHARS)
    reason = _one_line(reason) if reason else None
    return "  ", status.upper(), f" {name} at {where}: {with_reason(message, reason)}"


def did_not_pass_line(*, status: str, name: str, where: str, message: str, reason: str | None) -> str:
    """`  FAILED serve at guide.md:126: exit 1: server never became ready` (see did_not_pass_parts)."""
    parts = did_not_pass_parts(status=status, name=name, where=where, message=message, reason=reason)
    return "".join(parts)


def status_counts(results: Iterable[BlockResult]) -> dict[Status, int]:
    """How many blocks ended with each status that some block has, in the order of Status (passed first)."""
    seen = [result.status for result in results]
    return {status: seen.count(status) for status in Status if status in seen}


def status_tally(results: Iterable[BlockResult]) -> str:
    """`3 passed, 1 failed, 2 not_run`: the counts in the order of Status, whatever order the blocks ran in; "" for none."""
    return ", ".join(f"{count} {status.value}" for status, count in status_counts(results).items())


def block_tally(results: Iterable[BlockResult]) -> str:
    """`5 blocks: 3 passed, 1 failed, 1 skipped`, `1 block: 1 passed`, or `no blocks`."""
    results = list(results)
    if not results:
        return "no blocks"
    return f"{plural(len(results), 'block')}: {status_tally(results)}"
