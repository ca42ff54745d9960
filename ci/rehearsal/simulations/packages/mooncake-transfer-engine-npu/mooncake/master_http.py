"""[simulation] mooncake_master's two HTTP services: the metadata store (GET/PUT ?key=) and the admin server."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

_SIMULATION_HEADER = "guide-guard rehearsal stand-in for mooncake_master"
_ADMIN_ROUTES = {
    "/metrics": b"# [simulation] mooncake_master metrics\nmaster_key_count 0\n",
    "/health": b"OK\n",
}


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, bytes] | None] = None  # fixed routes (the admin server), or None: the metadata store
    entries: ClassVar[dict[str, bytes]] = {}  # the metadata store's keys (each server class has its own)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Simulation", _SIMULATION_HEADER)
        self.end_headers()
        self.wfile.write(body)

    def _key(self) -> str:
        return self.path.partition("key=")[2]

    def do_GET(self) -> None:
        if self.routes is not None:
            body = self.routes.get(self.path.partition("?")[0])
            self._answer(200 if body is not None else 404, body or b"not found\n")
            return
        key = self._key()
        if key in self.entries:
            self._answer(200, self.entries[key])
        else:
            self._answer(404, json.dumps({"error": "metadata not found", "key": key}).encode())

    def do_PUT(self) -> None:
        if self.routes is not None:
            self._answer(405, b"method not allowed\n")
            return
        self.entries[self._key()] = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer(200, b"metadata updated")

    def log_message(self, format: str, *args: object) -> None:
        pass  # the real master's log has no access lines


def _server(host: str, port: int, routes: dict[str, bytes] | None) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"routes": routes, "entries": {}})
    return ThreadingHTTPServer((host, port), handler)


def metadata_server(host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP metadata store, bound (OSError when the port is taken); serve it on a thread."""
    return _server(host, port, None)


def admin_server(host: str, port: int) -> ThreadingHTTPServer:
    """The admin server on --metrics_port (/metrics, /health), bound; serve it on a thread."""
    return _server(host, port, dict(_ADMIN_ROUTES))
