"""A loopback HTTP server that answers like a web API (GitHub, the Hugging Face Hub, PyPI) with canned replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the stub answers on one path."""

    status: int = 200
    body: Any = None  # JSON-encoded unless it is str/bytes
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer (until the stub stops): the client must time out
    then: Reply | None = None  # the answer from the second request on (a rate limit that lifts)
    announce_length: bool = True  # False: no Content-Length, the body ends when the connection closes (HTTP/1.0)


class WebStub:
    """Routes by path (query included first, then without), then asks `responder`; records every request it gets."""

    def __init__(self) -> None:
        self.routes: dict[str, Reply] = {}
        # for answers that depend on the request (pagination, authorization): (path with query, headers) -> Reply
        self.responder: Callable[[str, dict[str, str]], Reply | None] | None = None
        self.requests: list[tuple[str, dict[str, str]]] = []  # (path with query, headers)
        self.methods: list[str] = []  # each request's method, in the order of `requests`
        self.stop = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.methods.append(self.command)
                stub.requests.append((self.path, dict(self.headers)))
                route = self.path if self.path in stub.routes else self.path.split("?")[0]
                reply = stub.routes.get(route)
                if reply is None and stub.responder is not None:
                    reply = stub.responder(self.path, dict(self.headers))
                if reply is None:
                    reply = Reply(404, {"message": "Not Found"})
                elif reply.then is not None:
                    stub.routes[route] = reply.then
                if reply.hang:
                    stub.stop.wait(30)
                    return
                if isinstance(reply.body, bytes):
                    data = reply.body
                elif isinstance(reply.body, str):
                    data = reply.body.encode()
                else:
                    data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                if "Content-Type" not in reply.headers:
                    self.send_header("Content-Type", "application/json")
                if reply.announce_length:
                    self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET  # routed alike (requests without a body): `methods` tells them apart

            def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def set(self, path: str, body: Any = None, status: int = 200, **options: Any) -> None:
        self.routes[path] = Reply(status, body, **options)

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


@contextmanager
def running_stub() -> Iterator[WebStub]:
    stub = WebStub()
    thread = threading.Thread(target=stub.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.stop.set()
        stub.server.shutdown()
        stub.server.server_close()
