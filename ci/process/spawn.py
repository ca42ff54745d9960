"""Starting a block's process: in a session of its own, stdin empty, output straight to files."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.base.signals import SUSPEND_SIGNALS

__all__ = ["WorkdirUnenterable", "become_subreaper", "keep_inherited_fds", "spawn_in_session"]

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
# Python ignores SIGPIPE and SIGXFSZ for itself, and a run ignores the signals that would suspend it
_RESTORED_SIGNALS = (
    *(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)),
    *SUSPEND_SIGNALS,
)


class WorkdirUnenterable(OSError):
    """The working directory cannot be entered by its path (a block removed it): no block can start there."""

    def __init__(self, workdir: str, cause: OSError) -> None:
        why = f"cannot enter the working directory {workdir} ({cause.strerror or cause}); was it removed?"
        super().__init__(cause.errno, why)


def become_subreaper() -> bool:
    """Ask Linux to re-parent orphans of our descendants to us, so we can reap them."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def keep_inherited_fds() -> None:
    """Pass no descriptor the harness inherited (beyond stdin, stdout, stderr) on to blocks.

    As subprocess's close_fds does for the engine the guides were written for:
    a runner's pipe handed down to a block's background server would keep
    the job step waiting on it. Descriptors Python opens are not inherited anyway.
    """
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
                os.set_inheritable(fd, False)


def spawn_in_session(
    argv: Sequence[str], env: Mapping[str, str], stdout: int, stderr: int, stdin_path: Path | None = None
) -> int:
    """Start argv in a new session (so its own process group), stdin from /dev/null (or STDIN_PATH), stdout and
    stderr to the files open on these descriptors; its pid.

    posix_spawn rather than subprocess: it is markedly cheaper per block. The
    output files are opened by the harness (ci.base.files.create_fresh), not by
    the child: a FIFO or a link planted at their names is never opened, and an
    open that blocks cannot hold the spawn. FileNotFoundError when argv[0] is
    not on env's PATH.
    """
    search_path = env.get("PATH", os.defpath)
    if search_path == os.environ.get("PATH", os.defpath):
        spawn, program = os.posix_spawnp, argv[0]  # searches the harness's PATH, in C
    else:
        spawn, program = os.posix_spawn, shutil.which(argv[0], path=search_path) or ""
        if not program:
            raise FileNotFoundError(f"{argv[0]} not found on PATH")
    pid = spawn(
        program,
        list(argv),
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, str(stdin_path or os.devnull), os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, stdout, 1),
            (os.POSIX_SPAWN_DUP2, stderr, 2),
        ],
        setsid=True,  # its own session and process group, so the whole tree can be ended
        # a block gets these back as a shell would have them, or `yes | head -1` fails with
        # "Broken pipe" instead of ending quietly, and Ctrl-Z in a block's own terminal does nothing
        setsigdef=_RESTORED_SIGNALS,
    )
    return pid
