"""A guide's blocks counted by status, as the console's verdict line and the step summary both show them."""

from __future__ import annotations

from collections.abc import Iterable

from ci.core.model import Status
from ci.core.outcome import BlockResult
from ci.core.text import plural

__all__ = ["block_tally", "status_counts", "status_tally"]


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
