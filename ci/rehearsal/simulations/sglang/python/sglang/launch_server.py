"""[simulation] `python -m sglang.launch_server`: checks its arguments and environment, then serves /health.

With --enable-spec-capture it reaches Mooncake only at the first capture (a /generate that asks for one),
as the real capture sink does, not at start-up: a store that cannot be set up fails that capture.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import rehearsal_simulation
from rehearsal_simulation import broken, say

from sglang.srt import server_args

STARTUP_S = 1.0  # stands in for weight loading and NPU graph capture (minutes on a 910B)
MOONCAKE_ATTEMPTS = 10


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--skip-tokenizer-init", action="store_true")
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--mem-fraction-static", type=float, default=0.8)
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--chunked-prefill-size", type=int, default=8192)
    parser.add_argument("--disable-radix-cache", action="store_true")
    parser.add_argument("--attention-backend")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    server_args.add_spec_capture_args(parser)  # none until the spec-capture patch changes server_args.py
    return parser


def connect_store(master: str) -> None:
    """Reach mooncake_master as the spec-capture client does; fail setup as sglang does when it cannot."""
    host, _, port = master.rpartition(":")
    for attempt in range(1, MOONCAKE_ATTEMPTS + 1):
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=2).close()
            print(f"spec-capture: connected to mooncake master {master}", flush=True)
            return
        except OSError:
            print(f"spec-capture: Client not available (master {master}, attempt {attempt})", flush=True)
            time.sleep(1)
    raise RuntimeError(f"spec-capture setup failed: mooncake master {master} not reachable")


def check_metadata_server(url: str) -> None:
    try:
        urllib.request.urlopen(f"{url}?key=rehearsal_probe", timeout=5).close()
    except urllib.error.HTTPError:
        pass  # any HTTP answer means the metadata server is up
    except OSError as exc:
        raise RuntimeError(f"MOONCAKE_METADATA_SERVER {url!r} not reachable: {exc}") from exc


class MooncakeStore:
    """[simulation] Mooncake's store client as the capture sink calls it; no data moves.

    On an Ascend host (ASCEND_RT_VISIBLE_DEVICES set) Mooncake refuses a segment whose location is the
    wildcard, which is what setup() registers its global segment with: SpecForge's Ascend companion patch
    makes the sink register none in setup() and mount the segment with location "cpu" instead.
    """

    def setup(
        self,
        local_hostname: str,
        metadata_server: str,
        global_segment_size: int,
        local_buffer_size: int,
        protocol: str,
        rdma_devices: str,
        master_server_addr: str,
    ) -> int:
        """The keyword arguments the real sink passes; the segment it registers has the wildcard location."""
        connect_store(master_server_addr)
        if metadata_server:
            check_metadata_server(metadata_server)
        return self.allocate_and_mount_segment(global_segment_size, protocol, "*") if global_segment_size else 0

    def allocate_and_mount_segment(self, size: int, protocol: str, location: str) -> int:
        devices = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        if location == "*" and devices:
            print(
                f"E mooncake store: cannot mount a {size}-byte segment: location:* is not supported "
                f"(Ascend host, ASCEND_RT_VISIBLE_DEVICES={devices})",
                flush=True,
            )
            return -1
        print(f"mooncake store: mounted a {size}-byte segment, location={location}, protocol={protocol}", flush=True)
        return 0


class Capture:
    """The capture sink, set up at the first capture; a failed setup is tried again at the next one."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.lock = threading.Lock()

    def first_or_next(self) -> dict[str, Any]:
        """What the capture of one request says; RuntimeError when the Mooncake store cannot be set up."""
        with self.lock:
            if self.sink.store is None:
                print("spec-capture: first capture: setting up the Mooncake store", flush=True)
                try:
                    self.sink.connect(MooncakeStore())
                except RuntimeError as exc:
                    print(f"spec-capture: capture failed: {exc}", flush=True)
                    raise
                print("spec-capture: mooncake sink connected", flush=True)
        return dict(self.sink.describe())


def require_libatb() -> None:
    """Hybrid (Mamba/GDN) models make torch_npu lazy-load libatb.so during graph capture."""
    for directory in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if directory and Path(directory, "libatb.so").is_file():
            return
    raise OSError("libatb.so: cannot open shared object file: No such file or directory")


def die_starting() -> None:
    """REHEARSAL_BREAK=sglang-dies-starting: the scheduler dies while the model loads and the server exits.

    Invented: the lines and the error (an NPU out-of-memory) stand for any start-up death; what matters is that
    the process is gone while /health was never served.
    """
    say("REHEARSAL_BREAK=sglang-dies-starting: the scheduler dies while loading the model", sys.stdout)
    print("Load weight begin. avail mem=60.96 GB", flush=True)
    time.sleep(0.5)
    print("Scheduler hit an exception: Traceback (most recent call last):", flush=True)
    print('  File "sglang/srt/managers/scheduler.py", in run_scheduler_process', flush=True)
    print("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)", flush=True)
    print("Received sigquit from a child process. It usually means the child failed.", flush=True)
    sys.exit(1)


def serve(args: argparse.Namespace, capture: Capture | None) -> None:
    unhealthy = broken("sglang-never-healthy")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Simulation", "guide-guard rehearsal stand-in for sglang.launch_server")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                if unhealthy:
                    self._answer(503, b"[simulation] REHEARSAL_BREAK=sglang-never-healthy\n")
                else:
                    self._answer(200, b"OK\n")
            elif self.path == "/get_model_info":
                info = {"model_path": args.model_path, "simulation": True}
                self._answer(200, json.dumps(info).encode(), "application/json")
            else:
                self._answer(404, b"not found\n")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/generate":
                self._answer(404, b"not found\n")
                return
            captured = None
            if capture is not None and request.get("spec_capture"):
                try:
                    captured = capture.first_or_next()
                except RuntimeError as exc:
                    # the reason phrase carries the error to the client (urllib's HTTPError shows it)
                    self.send_response(500, f"spec-capture failed: {exc}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            answer = {
                "text": "",
                "meta_info": {"prompt_tokens": len(str(request.get("text", "")).split()), "spec_capture": captured},
                "simulation": True,
            }
            self._answer(200, json.dumps(answer).encode(), "application/json")

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    if unhealthy:
        say("REHEARSAL_BREAK=sglang-never-healthy: /health answers 503 for ever", sys.stdout)
    print(f"The server is fired up and ready to roll! (http://{args.host}:{args.port})", flush=True)
    server.serve_forever()


def main() -> int:
    rehearsal_simulation.record("sglang.launch_server")
    say("sglang.launch_server: guide-guard rehearsal stand-in (no NPU, no weights loaded)", sys.stdout)
    args = build_parser().parse_args()
    rehearsal_simulation.register_process("sglang.launch_server")
    model_config = json.loads(Path(args.model_path, "config.json").read_text(encoding="utf-8"))
    capture = None
    if getattr(args, "enable_spec_capture", False):
        if args.chunked_prefill_size != -1:
            # the real scheduler raises ValueError here (issue 37), not an assertion
            raise ValueError("--enable-spec-capture needs --chunked-prefill-size -1 (one prefill pass)")
        from sglang.srt.spec_capture_sink import SpecCaptureSink

        capture = Capture(SpecCaptureSink(args.spec_capture_method, args.spec_capture_aux_layer_ids))
    # a multimodal checkpoint keeps its language model's settings under text_config (Qwen3.5's layout)
    layer_types = model_config.get("text_config", model_config).get("layer_types", [])
    if "linear_attention" in layer_types and args.attention_backend == "ascend":
        require_libatb()
    if broken("sglang-dies-starting"):
        die_starting()
    time.sleep(STARTUP_S)
    serve(args, capture)
    return 0


if __name__ == "__main__":
    sys.exit(main())
