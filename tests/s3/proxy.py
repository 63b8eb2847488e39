"""A fault-injecting, request-counting HTTP proxy on loopback, in front of the moto S3 server.

Clients (lance_ops through s3fs, pylance through object_store) point ``aws_endpoint`` at the proxy;
it forwards each request to the server and relays the answer, unless a :class:`Fault` says otherwise:

* ``"500"`` / ``"503"``: answer ``500 InternalError`` / ``503 SlowDown`` with an S3 XML error body;
* ``"reset"``: close the client's connection with a TCP reset, no answer;
* ``"truncate"``: send the answer's headers (its real ``Content-Length``) and half its body, then reset.

A fault applies to the next ``count`` requests matching its operations (and path substring), or to
a ``rate`` of them drawn from a seeded random generator (so a run is repeatable for a given request
order). ``forward_first=True`` makes a fault *ambiguous*: the request reaches the server (a PUT
lands) and only the answer is lost or replaced, as when a connection drops after the server acted.

Every request is counted by operation (:func:`operation`): ``GET`` (whole object), ``GET range``,
``HEAD``, ``LIST``, ``PUT``, ``PUT if-none-match``, ``PUT part``, ``POST multipart``, ``DELETE``,
``DELETE batch``, and ``OTHER``. Faulted requests are counted too (the server may not have seen them).

``latency`` (seconds, default 0) delays every request before it is forwarded, standing for the
round trip of a real object store (loopback has almost none); the benchmark uses it to show what
concurrent requests save.

Bounded: the proxy listens on 127.0.0.1 only, at a free port, and shuts itself down after
``max_seconds``; a fault with a rate stops after ``limit`` injections.
"""

from __future__ import annotations

import collections
import http.client
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

__all__ = ["FAULT_KINDS", "Fault", "FaultProxy", "operation", "running_proxy"]

FAULT_KINDS = frozenset({"500", "503", "reset", "truncate"})

# Hop-by-hop headers a proxy must not relay (RFC 9110 7.6.1), plus the framing it redoes itself.
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)

_ERROR_BODIES = {
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "SlowDown", "Please reduce your request rate."),
}


def operation(method: str, target: str, headers: dict[str, str]) -> str:
    """The S3 operation a request is, for counting (see module docstring)."""
    split = urlsplit(target)
    query = parse_qs(split.query, keep_blank_values=True)
    if method == "HEAD":
        return "HEAD"
    if method == "GET":
        bucket_level = split.path.strip("/").count("/") == 0
        if "list-type" in query or (bucket_level and ("prefix" in query or "delimiter" in query)):
            return "LIST"
        if bucket_level:
            return "LIST"
        return "GET range" if "range" in headers else "GET"
    if method == "PUT":
        if "partNumber" in query:
            return "PUT part"
        return "PUT if-none-match" if "if-none-match" in headers else "PUT"
    if method == "POST":
        if "delete" in query:
            return "DELETE batch"
        if "uploads" in query or "uploadId" in query:
            return "POST multipart"
    if method == "DELETE":
        return "DELETE"
    return "OTHER"


@dataclass
class Fault:
    """What to do to which requests; see the module docstring."""

    kind: str
    count: int = 0
    rate: float = 0.0
    seed: int = 0
    limit: int = 1000
    operations: frozenset[str] | None = None
    path_contains: str = ""
    forward_first: bool = False
    injected: int = 0
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {sorted(FAULT_KINDS)}")
        self._random = random.Random(self.seed)

    def matches(self, op: str, path: str) -> bool:
        return (self.operations is None or op in self.operations) and self.path_contains in path

    def fire(self) -> bool:
        """Whether this matching request gets the fault (consumes a count or draws the random)."""
        if self.injected >= self.limit:
            return False
        if self.count > 0:
            self.count -= 1
        elif self.rate <= 0 or self._random.random() >= self.rate:
            return False
        self.injected += 1
        return True


class FaultProxy:
    """The proxy server: ``endpoint`` is its URL; :meth:`inject` adds faults; ``counts`` tallies."""

    def __init__(self, upstream: str, max_seconds: float = 600.0, latency: float = 0.0) -> None:
        target = urlsplit(upstream)
        self.latency = latency
        if target.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError("the proxy only forwards to a loopback server")
        self.upstream = (target.hostname, target.port or 80)
        self.counts: collections.Counter[str] = collections.Counter()
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._timer = threading.Timer(max_seconds, self.stop)
        self._timer.daemon = True

    def start(self) -> FaultProxy:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def inject(self, kind: str, **kwargs: object) -> Fault:
        """Add a :class:`Fault` (keyword arguments as its fields) and return it."""
        fault = Fault(kind, **kwargs)  # type: ignore[arg-type]
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove all faults."""
        with self._lock:
            self.faults.clear()

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()

    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def _decide(self, op: str, path: str) -> Fault | None:
        with self._lock:
            self.counts[op] += 1
            for fault in self.faults:
                if fault.matches(op, path) and fault.fire():
                    return fault
            return None


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections as they would with S3
        _upstream: http.client.HTTPConnection | None = None

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _body(self) -> bytes:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("content-length") or 0))

        def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            for _ in range(2):  # a kept-alive upstream connection may have been closed by the server
                if self._upstream is None:
                    self._upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                    self._upstream.connect()
                    self._upstream.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    self._upstream.request(self.command, self.path, body=body, headers=headers)
                    response = self._upstream.getresponse()
                    data = response.read()
                    return response.status, response.getheaders(), data
                except (http.client.HTTPException, ConnectionError):
                    self._upstream.close()
                    self._upstream = None
            raise ConnectionError("upstream server unreachable")

        def _reset(self) -> None:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()

        def _send(self, status: int, headers: list[tuple[str, str]], data: bytes, cut: bool) -> None:
            self.send_response_only(status)
            has_length = False
            for key, value in headers:
                if key.lower() in _HOP_HEADERS:
                    continue
                has_length = has_length or key.lower() == "content-length"
                self.send_header(key, value)
            if not has_length:
                self.send_header("Content-Length", str(len(data)))
            # Headers and body in one send: two small writes would meet the client's delayed ACK.
            self._headers_buffer.append(b"\r\n")
            if self.command != "HEAD":
                self._headers_buffer.append(data[: len(data) // 2] if cut else data)
            self.flush_headers()
            if cut:
                self._reset()

        def _error(self, kind: str) -> None:
            status, code, message = _ERROR_BODIES[kind]
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f"<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
            ).encode()
            self._send(
                status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))], body, False
            )

        def _handle(self) -> None:
            body = self._body()
            lowered = {k.lower(): v for k, v in self.headers.items()}
            op = operation(self.command, self.path, lowered)
            fault = proxy._decide(op, urlsplit(self.path).path)
            if proxy.latency:
                time.sleep(proxy.latency)
            if fault is None:
                self._send(*self._forward(body), cut=False)
                return
            answer = self._forward(body) if fault.forward_first or fault.kind == "truncate" else None
            if fault.kind == "reset":
                self._reset()
            elif fault.kind == "truncate":
                assert answer is not None
                status, headers, data = answer
                if len(data) < 2 or self.command == "HEAD":
                    self._send(status, headers, data, cut=False)
                else:
                    self._send(status, headers, data, cut=True)
            else:
                self._error(fault.kind)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        def finish(self) -> None:
            try:
                super().finish()
            except OSError:
                pass
            if self._upstream is not None:
                self._upstream.close()

    return Handler


@contextmanager
def running_proxy(upstream: str, max_seconds: float = 600.0, latency: float = 0.0) -> Iterator[FaultProxy]:
    """A started :class:`FaultProxy` in front of ``upstream``, stopped on exit."""
    proxy = FaultProxy(upstream, max_seconds, latency).start()
    try:
        yield proxy
    finally:
        proxy.stop()
