"""[simulation] torch 2.10.0+cpu as the 910B image ships it: no tensors, just what the guide asks of it."""

from __future__ import annotations

import rehearsal_simulation

from . import cuda

__all__ = ["__version__", "cuda"]
__version__ = "2.10.0+cpu"

rehearsal_simulation.say("torch: rehearsal stand-in for torch 2.10.0+cpu (no real tensors)")
