"""[simulation] mooncake_master: the HTTP metadata, metrics and RPC ports on 127.0.0.1, until ended.

What is taken from the real master (mooncake-store/src/master.cpp and rpc_service.cpp, see
docs/rehearsal.md for the commits): the gflags it accepts and their defaults; the HTTP metadata
server starts first and a failure to start it ends the master; the metrics HTTP service listens on
--metrics_port whatever --enable_metric_reporting says (that flag only switches the periodic
metrics log); the RPC server comes last. What is not: it listens on 127.0.0.1 only (the real one on
0.0.0.0), and a port it cannot bind ends it with one error line.
"""

from __future__ import annotations

import ctypes
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
_PR_SET_NAME = 15  # <linux/prctl.h>
_PROCESS_NAME = b"mooncake_master"  # what the kernel shows as the binary's name (15 bytes and a NUL)


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


def look_like_the_binary(argv: list[str]) -> None:
    """Show the command line and name the real binary has: `<site-packages>/mooncake/mooncake_master ARGS`.

    This program runs under a Python interpreter, so the kernel's command line
    starts with the interpreter. The real master is an ELF binary: its command
    line starts with its own path, and `pkill -f` or `pgrep -f` patterns must
    match that. The argument area is rewritten in place, as setproctitle does:
    the new text is shorter, ends with a NUL, and a non-NUL last byte tells the
    kernel to read /proc/PID/cmdline up to that NUL.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NAME, ctypes.c_char_p(_PROCESS_NAME), 0, 0, 0)
    try:
        with open("/proc/self/stat", encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        arg_start, arg_end = int(fields[45]), int(fields[46])  # fields 48 and 49 of proc(5)
    except (OSError, IndexError, ValueError):
        return
    title = " ".join(argv).encode() + b"\0"
    size = arg_end - arg_start
    if arg_start <= 0 or len(title) >= size:
        return  # nothing known, or no room: keep the interpreter's command line
    ctypes.memmove(arg_start, title + b" " * (size - len(title)), size)


def fail(message: str) -> int:
    print(f"E [simulation] mooncake_master: {message}", file=sys.stderr, flush=True)
    return 1


def bind(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def hold(connection: socket.socket) -> None:
    """Keep a client connected until it hangs up; its end sees EOF when the master goes away."""
    with connection:
        while connection.recv(4096):
            pass


def serve_rpc(listener: socket.socket) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=hold, args=(connection,), daemon=True).start()


def http_server(port: int, routes: dict[str, bytes] | None = None) -> ThreadingHTTPServer:
    """An HTTP server bound on return (serve it on a thread): the metadata store, or fixed routes."""
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
            if routes is not None:
                body = routes.get(self.path.partition("?")[0])
                self._answer(200 if body is not None else 404, body or b"not found\n")
                return
            key = self._key()
            if key in entries:
                self._answer(200, entries[key])
            else:
                self._answer(404, json.dumps({"error": "metadata not found", "key": key}).encode())

        def do_PUT(self) -> None:
            entries[self._key()] = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._answer(200, b"metadata updated")

        def log_message(self, format: str, *args: object) -> None:
            pass  # the real master's log has no access lines

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def start(server_for: str, port: int, routes: dict[str, bytes] | None = None) -> str | None:
    """Start one HTTP service on its thread; None, or why it could not bind."""
    try:
        server = http_server(port, routes)
    except OSError as exc:
        return f"Failed to start {server_for} on 127.0.0.1:{port}: {exc.strerror}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"{server_for} started on 127.0.0.1:{port}", flush=True)
    return None


def main() -> int:
    rehearsal_simulation.record("mooncake_master")
    flags = parse_flags(sys.argv[1:])
    look_like_the_binary(sys.argv)
    rehearsal_simulation.register_process("mooncake_master")
    rpc_port = int(flags["rpc_port"])
    say(f"mooncake_master: guide-guard rehearsal stand-in, RPC on 127.0.0.1:{rpc_port}", sys.stdout)
    if broken("mooncake-no-bind"):
        say(f"REHEARSAL_BREAK=mooncake-no-bind: never binding 127.0.0.1:{rpc_port}", sys.stdout)
        while True:
            time.sleep(60)
    if flags["enable_http_metadata_server"] == "true":
        problem = start("HTTP metadata server", int(flags["http_metadata_server_port"]))
        if problem:
            return fail(problem)
    metrics = b"# [simulation] mooncake_master metrics\nmaster_key_count 0\n"
    problem = start("HTTP metrics server", int(flags["metrics_port"]), {"/metrics": metrics, "/health": b"OK\n"})
    if problem:
        return fail(problem)
    try:
        listener = bind(rpc_port)
    except OSError as exc:
        return fail(f"Failed to start the RPC server on 127.0.0.1:{rpc_port}: {exc.strerror}")
    print(f"Master service started on port {rpc_port}", flush=True)
    serve_rpc(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main())
