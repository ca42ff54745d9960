"""guide-guard: run the labelled command blocks of Markdown guides and report every block."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ci.base.signals import ALWAYS_STOP, STOP_SIGNALS
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
    from ci.report.recap import did_not_pass_line
    from ci.run.outputs import KEEP_NEWEST, make_temporary_outputs

# Besides the guide's records and the matcher, what an application of the harness (the rehearsal, ci/rehearsal/)
# needs to act as ci.run does around a run it starts:
# - STOP_SIGNALS, ALWAYS_STOP: the signals on which ci.run stops, ends its blocks and writes its reports (those of
#   STOP_SIGNALS ignored at its start stay ignored, but ALWAYS_STOP's); a wrapper passes them on to its ci.run.
# - make_temporary_outputs(kind), KEEP_NEWEST: a new output directory under $TMPDIR/guide-guard/ ("run" or
#   "rehearsal"), made as ci.run makes its own when given no --output-dir, the oldest there pruned (the KEEP_NEWEST
#   newest kept); it returns the new directory's path and the warnings to show.
# - did_not_pass_line(status=, name=, where=, message=, reason=): a block that did not pass in one line, as ci.run's
#   recap says it (`  FAILED serve at guide.md:126: exit 1: server never became ready`), from results.json's fields.
__all__ = [
    "ALWAYS_STOP",
    "KEEP_NEWEST",
    "STOP_SIGNALS",
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
    "did_not_pass_line",
    "make_temporary_outputs",
    "matches",
    "split_pieces",
]

__version__ = "0.2.0"

# Loaded on first use, so that `python -m ci.run --help` (which imports this package first) stays fast.
_HOMES = {
    "matches": "ci.expect.match",
    "split_pieces": "ci.expect.match",
    **dict.fromkeys(("BlockResult", "GuideOutcome", "MatchReport"), "ci.record.outcome"),
    **dict.fromkeys(("ALWAYS_STOP", "STOP_SIGNALS"), "ci.base.signals"),
    **dict.fromkeys(("KEEP_NEWEST", "make_temporary_outputs"), "ci.run.outputs"),
    "did_not_pass_line": "ci.report.recap",
}


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(_HOMES.get(name, "ci.guide.model")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ci' has no attribute {name!r}")
