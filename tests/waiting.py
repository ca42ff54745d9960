"""Waiting on a condition in tests: never a fixed sleep standing in for an order of events."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_for"]


def wait_for(predicate: Callable[[], bool], what: str, limit_s: float = 30) -> None:
    """Return once PREDICATE holds; AssertionError naming WHAT when it has not within LIMIT_S (a generous bound)."""
    until = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > until:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)
