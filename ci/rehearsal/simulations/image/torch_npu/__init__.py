"""[simulation] torch_npu 2.10.0: registers torch.npu, backed by four simulated 910B4 cards."""

from __future__ import annotations

import sys

import rehearsal_simulation
import torch

from . import npu

__all__ = ["__version__", "npu"]
__version__ = "2.10.0"

torch.npu = npu  # type: ignore[attr-defined]  # the real torch_npu patches torch the same way
sys.modules["torch.npu"] = npu

rehearsal_simulation.say("torch_npu: rehearsal stand-in; torch.npu reports 4 simulated 910B4 cards")
