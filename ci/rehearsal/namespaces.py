"""Private network and mount namespaces for a rehearsal, and the guide's /tmp files bound into its sandbox."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import socket
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ci.rehearsal.model import SHARED_ENV, SetupError

__all__ = ["bind", "isolate", "redirect_scratch", "scratch_files"]

_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWUSER = 0x00020000, 0x40000000, 0x10000000  # <linux/sched.h>
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000  # <linux/mount.h>
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1  # <linux/sockios.h>, <net/if.h>
# files the guide writes in /tmp, named in its blocks; not the globs of its ci.collect (`/tmp/smoke-*.log`),
# whose lookahead keeps a name from being cut short at a wildcard
_SCRATCH = re.compile(r"/tmp/[A-Za-z0-9._-]+(?![A-Za-z0-9._*?\[-])")


def isolate() -> str | None:
    """Move this process, before it starts any thread, into network and mount namespaces of its own.

    The network's only interface is a loopback: nothing the guide runs can
    reach the network, and the guide's fixed ports cannot clash with another
    rehearsal or a real server. The mount namespace lets the guide's /tmp
    files be the sandbox's (redirect_scratch). Root gets both directly; others
    through a user namespace that maps only their own uid. Returns why not when
    the machine does not allow it (a container without the capability, user
    namespaces disabled or confined): the rehearsal then shares the machine's
    loopback and /tmp. A forked child tries every step first, since a process
    cannot return to the namespaces it left.
    """
    if os.environ.get(SHARED_ENV) == "1":
        return f"{SHARED_ENV}=1"
    probe_files = [tempfile.mkstemp(prefix="guide-guard-rehearsal-probe-") for _ in range(2)]
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the probe: report the first failure; its mounts vanish with it
        os.close(read_end)
        try:
            _enter_namespaces()
            bind(probe_files[0][1], probe_files[1][1])
            reason = b""
        except Exception as exc:  # any failure means: not here
            reason = str(exc).encode() or type(exc).__name__.encode()
        os.write(write_end, reason)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        reason_text = answer.read().decode("utf-8", "replace")
    os.waitpid(child, 0)
    for descriptor, path in probe_files:
        os.close(descriptor)
        os.unlink(path)
    if reason_text:
        return f"no private namespaces here: {reason_text}"
    _enter_namespaces()
    return None


def _enter_namespaces() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS) != 0:
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
    # mounts made from now on stay in this namespace
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), f"making / private: {os.strerror(ctypes.get_errno())}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(control, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(control, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))


def bind(source: str, target: str) -> None:
    """Bind-mount source over target, in this process's mount namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), None, _MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), f"cannot bind {source} over {target}: {os.strerror(ctypes.get_errno())}")


def scratch_files(guide_text: str) -> list[str]:
    """The /tmp files the guide's blocks name (logs, pid files)."""
    return sorted(set(_SCRATCH.findall(guide_text)))


def redirect_scratch(paths: Sequence[str], directory: Path) -> None:
    """Bind the sandbox's own copy over each of the guide's /tmp files, in this mount namespace only.

    A bind mount needs an existing file to cover, so an empty one is created
    on the machine where none exists yet; what the guide writes stays in the
    sandbox, and concurrent rehearsals do not read each other's logs.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for path in paths:
        own = directory / os.path.basename(path)
        own.touch()
        if not os.path.lexists(path):
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        try:
            bind(str(own), path)
        except OSError as exc:
            raise SetupError(str(exc)) from exc
