"""[simulation] torch.npu as torch_npu registers it: four simulated Ascend 910B4 cards."""

from __future__ import annotations

import os

SIMULATED_CARDS = 4


def device_count() -> int:
    """Cards left visible by ASCEND_RT_VISIBLE_DEVICES, counted as the Ascend runtime does."""
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").strip()
    if not visible:
        return SIMULATED_CARDS
    cards = [card.strip() for card in visible.split(",")]
    return len([card for card in cards if card.isdigit() and int(card) < SIMULATED_CARDS])


def is_available() -> bool:
    return device_count() > 0


def get_device_name(index: int = 0) -> str:
    return "Ascend910B4 (simulated)"
