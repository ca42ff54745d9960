"""What every stage stands on: files the harness writes, text safe to show, bounded output views, masking, stop signals;
dependencies imported when first used."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["lazy_import"]


def lazy_import(name: str) -> ModuleType:
    """The module NAME, run at the first use of one of its names rather than now.

    For a dependency a passing run never touches: psutil (processes left
    behind, memory samples) and PyYAML (front matter) take some 15 ms each to
    import, a tenth of the harness's start-up. Modules that import them this
    way name the real module under TYPE_CHECKING, for the type checker.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
