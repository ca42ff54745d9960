"""Free TCP ports on 127.0.0.1 for tests that start servers with ports of their own choosing."""

from __future__ import annotations

import socket

__all__ = ["free_ports"]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free a moment ago (all held at once while chosen, so never the same)."""
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports
