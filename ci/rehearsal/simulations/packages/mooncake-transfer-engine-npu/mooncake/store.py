"""[simulation] mooncake.store: imports clean, as the real one does once libibverbs/libcurl/libnuma are present.

Two knobs make it fail to load as the real compiled module did on real nights (issue 37), with the dynamic
loader's message: cuda-wheel (the index served a CUDA build of the wheel: libcuda.so.1) and apt-missing-lib
(the system's libibverbs is absent: libibverbs.so.1).
"""

from __future__ import annotations

import rehearsal_simulation

_UNLOADABLE = {"cuda-wheel": "libcuda.so.1", "apt-missing-lib": "libibverbs.so.1"}
for _knob, _library in _UNLOADABLE.items():
    if rehearsal_simulation.broken(_knob):
        rehearsal_simulation.say(f"REHEARSAL_BREAK={_knob}: mooncake.store cannot load {_library}")
        raise ImportError(f"{_library}: cannot open shared object file: No such file or directory")

rehearsal_simulation.say("mooncake.store: rehearsal stand-in (no transfer engine)")


class MooncakeDistributedStore:
    """Only the name: the rehearsal's trainer and server talk to mooncake_master over a plain socket."""

    def setup(self, *args: object, **kwargs: object) -> int:
        return 0
