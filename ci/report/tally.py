"""A guide's blocks counted by status, as the console's verdict line and the step summary both show them."""

from __future__ import annotations

from collections.abc import Iterable

from ci.core.model import BlockResult, Status

__all__ = ["status_counts", "status_tally"]


def status_counts(results: Iterable[BlockResult]) -> dict[Status, int]:
    """How many blocks ended with each status, in the order the statuses first appear."""
    counts: dict[Status, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return counts


def status_tally(results: Iterable[BlockResult]) -> str:
    """`3 passed, 1 failed, 2 not_run`: the counts in the order the statuses first appear; "" for no blocks."""
    return ", ".join(f"{count} {status.value}" for status, count in status_counts(results).items())
