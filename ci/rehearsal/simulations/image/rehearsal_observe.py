"""[simulation] Imported at every start of the sandbox's Python: notes which block uses which of the guide's parts."""

# The rehearsal's report lists, per block, the parts it reached and whether each was real or a stand-in.
# The fake tools and the stand-in programs record their own calls; this records what they cannot: the
# first import, in a process, of one of the guide's Python packages (a stand-in of the simulated image, or
# a real package that uv installed), and the start of the real wheel's `mooncake_master`. It never changes
# what is imported, and a failure here never reaches the guide.

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys

import rehearsal_simulation

# Top-level packages of the guide's parts: always stand-ins, except huggingface_hub (always real) and
# mooncake (real when the real wheel is installed: its store module is a compiled extension).
_STAND_INS = {"torch", "torch_npu", "sglang", "specforge", "accelerate"}
_WATCHED = _STAND_INS | {"huggingface_hub", "mooncake"}
_seen: set[str] = set()


def _mooncake_is_real(origin: str | None) -> bool:
    if not origin:
        return False
    package = os.path.dirname(origin)
    return not os.path.isfile(os.path.join(package, "store.py"))  # the stand-in's store is Python


class _Observer(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name in _WATCHED and name not in _seen and path is None:
            _seen.add(name)
            with contextlib.suppress(Exception):
                spec = importlib.machinery.PathFinder.find_spec(name)
                if spec is not None:
                    real = name == "huggingface_hub" or (name == "mooncake" and _mooncake_is_real(spec.origin))
                    rehearsal_simulation.record(f"import {name}", [], real=real)
        return None  # the import itself goes on as if this finder were not there


if os.environ.get(rehearsal_simulation.SANDBOX_ENV):
    with contextlib.suppress(Exception):
        sys.meta_path.insert(0, _Observer())
        script = os.path.basename(sys.argv[0]) if sys.argv else ""
        if script == "mooncake_master":  # the console script; the stand-in's program records itself
            spec = importlib.machinery.PathFinder.find_spec("mooncake")
            if spec is not None and _mooncake_is_real(spec.origin):
                rehearsal_simulation.record("mooncake_master", sys.argv[1:], real=True)
