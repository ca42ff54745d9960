"""guide-guard: run the labelled command blocks of Markdown guides and report every block."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ci.expect.match import matches, split_pieces
    from ci.guide.model import (
        Block,
        DocumentError,
        Expected,
        GuideSettings,
        Label,
        Language,
        Load,
        Plan,
        Problem,
        Status,
        Step,
    )
    from ci.record.outcome import BlockResult, GuideOutcome, MatchReport

__all__ = [
    "Block",
    "BlockResult",
    "DocumentError",
    "Expected",
    "GuideOutcome",
    "GuideSettings",
    "Label",
    "Language",
    "Load",
    "MatchReport",
    "Plan",
    "Problem",
    "Status",
    "Step",
    "__version__",
    "matches",
    "split_pieces",
]

__version__ = "0.2.0"

# Loaded on first use, so that `python -m ci.run --help` (which imports this package first) stays fast.
_HOMES = {
    "matches": "ci.expect.match",
    "split_pieces": "ci.expect.match",
    **dict.fromkeys(("BlockResult", "GuideOutcome", "MatchReport"), "ci.record.outcome"),
}


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(_HOMES.get(name, "ci.guide.model")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ci' has no attribute {name!r}")
