"""[simulation] accelerate.utils: set_seed only."""

from __future__ import annotations

import random


def set_seed(seed: int) -> None:
    random.seed(seed)
