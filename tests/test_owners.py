"""Which block an adopted daemon came from when start times tie (docs/guarantees.md, "Which block a process came from").

A daemon that clears its environment, starts a session of its own and is
orphaned is placed by when it started. /proc gives start times in clock ticks
(10 ms): a block that ends right after forking such a daemon leaves the next
block to start in the daemon's very tick, and that block's time-out then ended
the earlier block's server. The test's own children stand in for the harness's
adopted ones (a process whose parent is the harness), real processes all.
"""

from __future__ import annotations

import shutil
import subprocess

from ci.process.owners import BlockStart, Owners, block_running_at
from ci.process.trees import ProcessTable, start_ticks

SLEEP = shutil.which("sleep") or "/bin/sleep"


def _daemon_like() -> subprocess.Popen[bytes]:
    """A child of this process in a session of its own, with no environment: as the harness sees an adopted daemon."""
    return subprocess.Popen([SLEEP, "1000"], start_new_session=True, env={})


def _ticks(proc: subprocess.Popen[bytes]) -> int:
    ticks = start_ticks(proc.pid)
    assert ticks is not None
    return ticks


def test_a_daemon_started_in_the_tick_the_next_block_starts_in_stays_with_its_own_block() -> None:
    """Real processes, started in turn (an earlier block, its daemon, the next block, that block's daemon); the next
    block is recorded as started in the very tick its predecessor's daemon started in, the tie under test, which
    waiting for the clock to produce would make the test a race against the machine's load."""
    started = [_daemon_like() for _ in range(4)]
    try:
        earlier, served, later, hung = started
        tie = _ticks(served)
        blocks = [BlockStart(earlier.pid, "serves", _ticks(earlier)), BlockStart(later.pid, "hangs", tie)]
        owners = Owners(ProcessTable(), {}, blocks, set())
        assert owners.of(served.pid) == "serves"  # not the block recorded in its tick, whose pid came after it
        assert owners.of(hung.pid) == "hangs"
        assert owners.of(later.pid) == "hangs"
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_pids_order_a_tick_across_their_wrap_around() -> None:
    """Pids are handed out in turn and wrap around at pid_max: within a tick, the later is the one just ahead."""
    pid_max = 32768
    serves, before_wrap, after_wrap = (
        BlockStart(30000, "serves", 100),
        BlockStart(32760, "a", 200),
        BlockStart(305, "b", 300),
    )
    starts = [serves, before_wrap, after_wrap]
    assert block_running_at(starts, 32750, 200, pid_max) == serves  # forked just before `a`, in its tick
    assert block_running_at(starts, 301, 200, pid_max) == before_wrap  # after `a`, pids having wrapped around
    assert block_running_at(starts, 32767, 300, pid_max) == before_wrap  # before `b`, which got a wrapped pid
    assert block_running_at(starts, 310, 300, pid_max) == after_wrap
    assert block_running_at(starts, 305, 300, pid_max) == after_wrap  # the block itself
    assert block_running_at(starts, 1, 250, pid_max) == before_wrap  # a later tick than `a`'s: its pid says nothing
    assert block_running_at(starts, 29999, 100, pid_max) is None  # before every block
