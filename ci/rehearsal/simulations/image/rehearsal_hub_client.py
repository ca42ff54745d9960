"""[simulation] Imported at every start of the sandbox's Python: the store-polluted knob's noisy download client.

With REHEARSAL_BREAK=store-polluted the real huggingface_hub's snapshot_download writes progress lines to file
descriptor 1 itself, not through sys.stdout, as a download client once did beside the path a store block
printed (issue 37; the lines are invented). Without the knob nothing is changed.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import rehearsal_simulation

KNOB = "store-polluted"


def _noisy(download: Callable[..., Any]) -> Callable[..., Any]:
    def snapshot_download(*args: Any, **kwargs: Any) -> Any:
        rehearsal_simulation.say(f"REHEARSAL_BREAK={KNOB}: snapshot_download writes its progress to fd 1")
        os.write(1, b"Fetching 4 files:   0%|          | 0/4 [00:00<?, ?it/s]\n")
        path = download(*args, **kwargs)
        os.write(1, b"Fetching 4 files: 100%|##########| 4/4 [00:00<00:00, 8.00it/s]\n")
        return path

    return snapshot_download


class _Loader(importlib.abc.Loader):
    """The real package's loader, then snapshot_download replaced by the noisy one."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.real.exec_module(module)
        module.snapshot_download = _noisy(module.snapshot_download)  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "huggingface_hub":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


if rehearsal_simulation.broken(KNOB):
    with contextlib.suppress(Exception):
        sys.meta_path.insert(0, _Finder())
