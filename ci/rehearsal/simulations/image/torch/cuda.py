"""[simulation] torch.cuda on an Ascend machine: no CUDA device."""

from __future__ import annotations


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0
