"""[simulation] mooncake_master: the HTTP metadata, admin (metrics) and RPC ports, glog lines on stderr, until ended.

What is taken from the real master: the gflags it accepts and their defaults, and that the HTTP
metadata server starts first and a failure to start it ends the master (mooncake-store/src/master.cpp,
see docs/rehearsal.md for the commits); the metrics HTTP service listening on --metrics_port whatever
--enable_metric_reporting says (rpc_service.cpp). What the 0.3.13.post1 NPU wheel's binary was seen to
do when run with the guide's flags: its glog lines on stderr (file:line tags and messages), the order
and rough timing of its start (the metadata port at once, the admin and RPC ports about a second
later, from another thread), all three ports on 0.0.0.0, its shutdown on SIGTERM (status 0), and how
it ends when a port is taken: an abort (SIGABRT) for the metadata port, status 1 with error lines for
the metrics port, status 1 without any error line for the RPC port.

Not the real one: it binds 0.0.0.0 only inside the rehearsal's private network namespace
(REHEARSAL_ISOLATION=private), 127.0.0.1 elsewhere, and it is a Python program.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import resource
import signal
import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer

import rehearsal_simulation
from rehearsal_simulation import broken, say

from mooncake.master_http import admin_server, metadata_server

# gflags the guide (and SpecForge's managed-local launcher) passes, with mooncake_master's defaults
FLAGS = {
    "rpc_port": "50051",
    "enable_http_metadata_server": "false",
    "http_metadata_server_port": "8080",
    "http_metadata_server_host": "0.0.0.0",
    "metrics_port": "9003",
    "enable_metric_reporting": "true",
}
ISOLATION_ENV = "REHEARSAL_ISOLATION"  # "private": the rehearsal runs in its own network namespace
_PR_SET_NAME = 15  # <linux/prctl.h>
_PROCESS_NAME = b"mooncake_master"  # what the kernel shows as the binary's name (15 bytes and a NUL)
_ADMIN_START_DELAY_S = 1.0  # observed: the cleanup thread and admin server about 1.0 s after the metadata server
_METADATA_STOP_DELAY_S = 0.7  # observed: "HTTP metadata server stopped" about 0.7 s after the cleanup thread stops
HOST_REASONS = {
    "0.0.0.0": "as the real one; inside the rehearsal's private network namespace",
    "127.0.0.1": "the real one listens on 0.0.0.0; here no private network namespace (REHEARSAL_ISOLATION) keeps it in",
}
_MAX_THREADS = 2  # the value the real master logged on the machine it was observed on


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


def listening_host() -> str:
    """0.0.0.0 as the real master, but only where no other machine or rehearsal can reach it."""
    return "0.0.0.0" if os.environ.get(ISOLATION_ENV, "") == "private" else "127.0.0.1"


def log(severity: str, where: str, message: str) -> None:
    """One glog line on stderr: `I1204 05:23:25.410279  2769 master.cpp:1522] message`."""
    now = datetime.datetime.now()
    prefix = f"{severity}{now:%m%d %H:%M:%S}.{now.microsecond:06d} {threading.get_native_id():5d} {where}]"
    print(f"{prefix} {message}", file=sys.stderr, flush=True)


def abort() -> None:
    """Die as a failed glog CHECK does: the stack-trace banner, then SIGABRT (no core file)."""
    print("*** Check failure stack trace: ***", file=sys.stderr, flush=True)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.abort()


def bind_rpc(host: str, port: int) -> socket.socket | None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        return None
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


def serve(server: ThreadingHTTPServer) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


def settings_line(flags: dict[str, str], host: str, metadata_host: str) -> str:
    """The start line's settings, in the order and spelling the real master logs the ones the guide sets."""
    metrics = "1" if flags["enable_metric_reporting"] == "true" else "0"
    metadata = "1" if flags["enable_http_metadata_server"] == "true" else "0"
    return (
        f"Master service started on port {flags['rpc_port']}, max_threads={_MAX_THREADS}, "
        f"enable_metric_reporting={metrics}, metrics_port={flags['metrics_port']}, metrics_host={host}, "
        f"rpc_port={flags['rpc_port']}, rpc_address={host}, enable_http_metadata_server={metadata}, "
        f"http_metadata_server_port={flags['http_metadata_server_port']}, http_metadata_server_host={metadata_host}"
    )


def start_metadata(flags: dict[str, str], host: str) -> ThreadingHTTPServer | None:
    """The HTTP metadata server, bound and served; None when disabled. Aborts when it cannot bind."""
    if flags["enable_http_metadata_server"] != "true":
        return None
    port = int(flags["http_metadata_server_port"])
    try:
        server = metadata_server(host, port)
    except OSError:
        log("E", "http_metadata_server.cpp:121", f"Failed to start HTTP metadata server on {host}:{port}")
        log("E", "master.cpp:1386", "Failed to start C++ HTTP metadata server")
        log("F", "master.cpp:1608", "Failed to start HTTP metadata server")
        abort()
        raise  # not reached: abort() does not return
    serve(server)
    return server


def stop(metadata: ThreadingHTTPServer | None) -> None:
    """What the master logs as it goes: the cleanup thread, then (0.7 s later) the metadata server."""
    log("I", "master_service.cpp:2619", "Task cleanup thread stopped")
    if metadata is not None:
        time.sleep(_METADATA_STOP_DELAY_S)
        metadata.server_close()
        log("I", "http_metadata_server.cpp:137", "HTTP metadata server stopped")


def run_services(flags: dict[str, str], host: str, metadata: ThreadingHTTPServer | None) -> int:
    """On a thread of its own, as the real master starts them: cleanup thread, admin server, RPC server."""
    time.sleep(_ADMIN_START_DELAY_S)
    metrics_port = int(flags["metrics_port"])
    try:
        admin = admin_server(host, metrics_port)
    except OSError as exc:
        log(
            "E",
            "master_admin_service.cpp:269",
            f"Failed to start master admin server on {host}:{metrics_port}: {exc.strerror}",
        )
        log("E", "master.cpp:1651", "Failed to start master admin server")
        log("I", "master_service.cpp:2596", "Task cleanup thread started")
        stop(metadata)
        return 1
    log("I", "master_service.cpp:2596", "Task cleanup thread started")
    serve(admin)
    log("I", "master_admin_service.cpp:310", f"Master admin server started on port {metrics_port}")
    listener = bind_rpc(host, int(flags["rpc_port"]))
    if listener is None:  # observed: the real master says nothing about it
        stop(metadata)
        return 1
    serve_rpc(listener)
    return 0  # not reached: serve_rpc serves until the process ends


def wait_for_shutdown(flags: dict[str, str], host: str, metadata: ThreadingHTTPServer | None) -> int:
    """Run the services until SIGTERM or SIGINT (status 0) or until one of them fails (its status)."""
    outcome: list[int] = []
    ended = threading.Event()

    def services() -> None:
        outcome.append(run_services(flags, host, metadata))
        ended.set()

    signal.signal(signal.SIGTERM, lambda signum, frame: ended.set())
    signal.signal(signal.SIGINT, lambda signum, frame: ended.set())
    threading.Thread(target=services, daemon=True).start()
    while not ended.wait(3600):
        pass
    if outcome:
        return outcome[0]
    log("I", "master.cpp:1683", "Shutdown signal received, exiting gracefully")
    stop(metadata)
    return 0


def main() -> int:
    rehearsal_simulation.record("mooncake_master")
    flags = parse_flags(sys.argv[1:])
    look_like_the_binary(sys.argv)
    rehearsal_simulation.register_process("mooncake_master")
    host = listening_host()
    say(f"mooncake_master: guide-guard rehearsal stand-in, listening on {host} ({HOST_REASONS[host]})")
    if broken("mooncake-no-bind"):
        say(f"REHEARSAL_BREAK=mooncake-no-bind: never binding its RPC port {flags['rpc_port']}")
        while True:
            time.sleep(60)
    print("WARNING: Logging before InitGoogleLogging() is written to STDERR", file=sys.stderr, flush=True)
    # --http_metadata_server_host (SpecForge's managed-local launcher passes it; not observed here) is taken
    # as where the metadata server listens
    metadata_host = flags["http_metadata_server_host"] if host == "0.0.0.0" else host
    metadata = start_metadata(flags, metadata_host)
    log("I", "master.cpp:1522", settings_line(flags, host, metadata_host))
    if metadata is not None:
        port = flags["http_metadata_server_port"]
        log("I", "master.cpp:1374", f"Starting C++ HTTP metadata server on {metadata_host}:{port}")
        log("I", "http_metadata_server.cpp:126", f"HTTP metadata server started on {metadata_host}:{port}")
        log("I", "master.cpp:1383", "C++ HTTP metadata server started successfully")
    return wait_for_shutdown(flags, host, metadata)


if __name__ == "__main__":
    sys.exit(main())
