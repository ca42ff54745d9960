"""Suggestions: the closest known word to a misspelt one, for the "did you mean" of a message."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest"]


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word most like WORD (case aside), None when none is close enough to be the one meant."""
    by_lower: dict[str, str] = {}
    for name in sorted(known):
        by_lower.setdefault(name.lower(), name)
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1)
    return by_lower[found[0]] if found else None
