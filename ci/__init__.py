"""guide-guard: run the labelled command blocks of Markdown guides and report every block."""

from ci.check import matches, split_pieces
from ci.model import (
    Block,
    BlockResult,
    DocumentError,
    Expected,
    GuideOutcome,
    GuideSettings,
    Label,
    Language,
    Load,
    MatchReport,
    Plan,
    Problem,
    Status,
    Step,
)

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

__version__ = "0.1.0"
