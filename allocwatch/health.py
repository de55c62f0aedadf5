"""Serves /metrics, /healthz and /readyz over HTTP, at a bounded cost to the watcher.

One thread and a selector serve every connection: a connection costs a
descriptor and a buffer, never a thread. At most MAX_CONNECTIONS are open at
once (a new one closes the oldest), each has `request_timeout` from its
accept to send its request and read the answer, and a request head is at
most MAX_REQUEST_BYTES. So however many clients connect, or however slowly
they send, the endpoint holds a few dozen descriptors, leaving the rest of
the process's limit to the override file and its lock, and a probe that
sends its request at once is answered. http.server parses each request,
from a buffer rather than the socket.
"""

from __future__ import annotations

import io
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from allocwatch.metrics import Metrics

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 32
MAX_REQUEST_BYTES = 16 << 10
BACKLOG = 64  # the default 5 stalls a burst of scrapes and probes

Answer = Callable[[str], tuple[int, bytes, str]]


class HealthServer:
    """Serves /metrics, /healthz and /readyz on a background thread."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
        request_timeout: float = 5.0,
    ) -> None:
        host, port = parse_address(address)
        registry = metrics.registry

        def answer(path: str) -> tuple[int, bytes, str]:
            if path == "/metrics":
                return 200, generate_latest(registry), CONTENT_TYPE_LATEST
            if path == "/healthz":
                return 200, b"ok\n", "text/plain"
            if path == "/readyz":
                ok, why = ready()
                return 200 if ok else 503, (why + "\n").encode(), "text/plain"
            return 404, b"not found\n", "text/plain"

        self._answer = answer
        self._timeout = request_timeout
        self._listener = _listen(host, port)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._connections: dict[socket.socket, _Connection] = {}  # oldest first
        self._wake, self._woken = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name="health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._wake.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        self._listener.close()
        self._wake.close()
        self._woken.close()

    def _serve(self) -> None:
        # Sleeps until a client connects or stop() is called, with no timer
        # while no connection is open (an idle watcher pays nothing for it).
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._woken, selectors.EVENT_READ)
            try:
                while True:
                    timeout = None
                    if self._connections:
                        oldest = next(iter(self._connections.values()))
                        timeout = max(0.0, oldest.deadline - time.monotonic())
                    for key, events in selector.select(timeout):
                        if key.fileobj is self._woken:
                            return
                        if key.fileobj is self._listener:
                            self._accept(selector)
                        elif key.fileobj in self._connections:
                            self._exchange(selector, key.data, events)
                    self._expire(selector)
            finally:
                for sock in list(self._connections):
                    self._close(selector, sock)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        for _ in range(MAX_CONNECTIONS):
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # out of descriptors: leave the rest queued
                log.debug("metrics endpoint: accept: %s", exc)
                time.sleep(0.1)
                return
            sock.setblocking(False)
            if len(self._connections) >= MAX_CONNECTIONS:
                self._close(selector, next(iter(self._connections)))
            conn = _Connection(sock, time.monotonic() + self._timeout)
            self._connections[sock] = conn
            selector.register(sock, selectors.EVENT_READ, conn)

    def _exchange(self, selector: selectors.BaseSelector, conn: _Connection, events: int) -> None:
        try:
            if conn.reply is None and events & selectors.EVENT_READ:
                data = conn.sock.recv(4096)
                conn.request += data
                if not data or len(conn.request) > MAX_REQUEST_BYTES:
                    self._close(selector, conn.sock)
                    return
                if b"\r\n\r\n" not in conn.request and b"\n\n" not in conn.request:
                    return
                conn.reply = memoryview(_Exchange(bytes(conn.request), self._answer).reply())
                selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
            if conn.reply is not None:
                conn.reply = conn.reply[conn.sock.send(conn.reply) :]
                if not conn.reply:
                    self._close(selector, conn.sock)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:  # a reset, a client gone: theirs, not ours to report
            log.debug("metrics endpoint: client connection: %s", exc)
            self._close(selector, conn.sock)

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for sock, conn in list(self._connections.items()):
            if conn.deadline > now:
                break  # in accept order, so every later one is younger
            self._close(selector, sock)

    def _close(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        del self._connections[sock]
        selector.unregister(sock)
        sock.close()


@dataclass
class _Connection:
    sock: socket.socket
    deadline: float
    request: bytearray = field(default_factory=bytearray)
    reply: memoryview | None = None


class _Exchange(BaseHTTPRequestHandler):
    """One request parsed and answered by http.server, from and into buffers."""

    def __init__(self, request: bytes, answer: Answer) -> None:  # no socket, no server
        self.rfile = io.BytesIO(request)
        self.wfile = io.BytesIO()
        self.client_address = ("", 0)
        self._answer_for = answer

    def reply(self) -> bytes:
        self.handle_one_request()
        return self.wfile.getvalue()

    def do_GET(self) -> None:
        self._send(*self._answer_for(self.path.split("?", 1)[0]))

    def do_HEAD(self) -> None:
        # Monitors and load balancers that probe with HEAD get GET's status.
        self._send(*self._answer_for(self.path.split("?", 1)[0]), with_body=False)

    def _send(self, code: int, body: bytes, ctype: str, with_body: bool = True) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # probes every few seconds would drown the change log


def _listen(host: str, port: int) -> socket.socket:
    if ":" in host or (host == "" and socket.has_ipv6):
        # An empty host means every address: dual stack, so probes work on
        # IPv6-only clusters as well.
        try:
            return socket.create_server(
                (host or "::", port),
                family=socket.AF_INET6,
                backlog=BACKLOG,
                dualstack_ipv6=socket.has_dualstack_ipv6(),
            )
        except OSError:
            if host:
                raise
            # no IPv6 on this host
    return socket.create_server((host, port), backlog=BACKLOG)


def parse_address(address: str) -> tuple[str, int]:
    """`:9477`, `0.0.0.0:9477`, `[::]:9477` → (host, port). Raises ValueError."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"{address!r} is not HOST:PORT (example :9477)")
    host = host.strip("[]")
    # int() would also take `9_477`, spaces and other scripts' digits
    if not (port.isascii() and port.isdigit()):
        raise ValueError(f"{address!r}: port {port!r} is not a number")
    number = int(port)
    if not 0 <= number <= 65535:
        raise ValueError(f"{address!r}: port {number} is out of range")
    return host, number
