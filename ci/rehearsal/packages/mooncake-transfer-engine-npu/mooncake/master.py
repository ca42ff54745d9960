"""[simulation] mooncake_master: listens on its RPC port (and the HTTP metadata port) on 127.0.0.1 until ended."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import rehearsal_simulation
from rehearsal_simulation import broken, say

# gflags the guide passes, with mooncake_master's defaults
FLAGS = {
    "rpc_port": "50051",
    "enable_http_metadata_server": "false",
    "http_metadata_server_port": "8080",
    "metrics_port": "9003",
    "enable_metric_reporting": "true",
}


def parse_flags(argv: list[str]) -> dict[str, str]:
    """gflags syntax: --name=value, or --name for a true boolean; unknown flags are fatal, as in gflags."""
    flags = dict(FLAGS)
    for arg in argv:
        name, separator, value = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in flags:
            print(f"ERROR: unknown command line flag '{name}'", file=sys.stderr)
            sys.exit(1)
        flags[name] = value if separator else "true"
    return flags


def hold(connection: socket.socket) -> None:
    """Keep a client connected until it hangs up; its end sees EOF when the master goes away."""
    with connection:
        while connection.recv(4096):
            pass


def serve_rpc(port: int) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=hold, args=(connection,), daemon=True).start()


def metadata_server(port: int) -> ThreadingHTTPServer:
    """The HTTP metadata server (bound on return; serve it on a thread)."""
    entries: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Simulation", "guide-guard rehearsal stand-in for mooncake_master")
            self.end_headers()
            self.wfile.write(body)

        def _key(self) -> str:
            return self.path.partition("key=")[2]

        def do_GET(self) -> None:
            key = self._key()
            if key in entries:
                self._answer(200, entries[key])
            else:
                self._answer(404, json.dumps({"error": "metadata not found", "key": key}).encode())

        def do_PUT(self) -> None:
            entries[self._key()] = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._answer(200, b"metadata updated")

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main() -> int:
    rehearsal_simulation.record("mooncake_master")
    flags = parse_flags(sys.argv[1:])
    rehearsal_simulation.register_process("mooncake_master")
    rpc_port = int(flags["rpc_port"])
    say(f"mooncake_master: guide-guard rehearsal stand-in, RPC on 127.0.0.1:{rpc_port}", sys.stdout)
    if broken("mooncake-no-bind"):
        say(f"REHEARSAL_BREAK=mooncake-no-bind: never binding 127.0.0.1:{rpc_port}", sys.stdout)
        while True:
            time.sleep(60)
    if flags["enable_http_metadata_server"] == "true":
        http_port = int(flags["http_metadata_server_port"])
        server = metadata_server(http_port)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print(f"HTTP metadata server on 127.0.0.1:{http_port}", flush=True)
    serve_rpc(rpc_port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
