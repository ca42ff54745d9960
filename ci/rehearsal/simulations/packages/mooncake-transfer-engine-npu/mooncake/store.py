"""[simulation] mooncake.store: imports clean, as the real one does once libibverbs/libcurl/libnuma are present."""

from __future__ import annotations

import rehearsal_simulation

rehearsal_simulation.say("mooncake.store: rehearsal stand-in (no transfer engine)")


class MooncakeDistributedStore:
    """Only the name: the rehearsal's trainer and server talk to mooncake_master over a plain socket."""

    def setup(self, *args: object, **kwargs: object) -> int:
        return 0
