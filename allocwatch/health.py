"""Serves /metrics, /healthz and /readyz over HTTP."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from allocwatch.metrics import Metrics


class HealthServer:
    """Serves /metrics, /healthz and /readyz on a background thread."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
        idle_timeout: float = 5.0,
    ) -> None:
        host, port = parse_address(address)
        registry = metrics.registry

        class Handler(BaseHTTPRequestHandler):
            # A client that connects and sends nothing holds a thread; let it
            # go after a while rather than keep one per such client forever.
            timeout = idle_timeout

            def do_GET(self) -> None:
                self._send(*self._answer())

            def do_HEAD(self) -> None:
                # Monitors and load balancers that probe with HEAD get GET's status.
                self._send(*self._answer(), with_body=False)

            def _answer(self) -> tuple[int, bytes, str]:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    return 200, generate_latest(registry), CONTENT_TYPE_LATEST
                if path == "/healthz":
                    return 200, b"ok\n", "text/plain"
                if path == "/readyz":
                    ok, why = ready()
                    return 200 if ok else 503, (why + "\n").encode(), "text/plain"
                return 404, b"not found\n", "text/plain"

            def _send(self, code: int, body: bytes, ctype: str, with_body: bool = True) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # probes every few seconds would drown the change log

        self._server = _bind(host, port, Handler)
        self._server.timeout = 0  # handle_request is only called once a client waits
        self.port = self._server.server_address[1]
        self._wake, self._woken = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name="health", daemon=True)

    def _serve(self) -> None:
        # Sleep until a client connects or stop() is called; not
        # serve_forever, which wakes on a timer to look for a shutdown
        # request, a cost an idle watcher would pay all day.
        with selectors.DefaultSelector() as selector:
            selector.register(self._server, selectors.EVENT_READ)
            selector.register(self._woken, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._woken:
                        return
                    self._server.handle_request()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._wake.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        self._server.server_close()
        self._wake.close()
        self._woken.close()


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 64  # the default 5 stalls a burst of scrapes and probes


class _Server6(_Server):
    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        # An empty host means every address: accept IPv4 too on the v6 socket.
        with contextlib.suppress(OSError):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def _bind(host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    if ":" in host:
        return _Server6((host, port), handler)
    if host == "" and socket.has_ipv6:
        try:  # dual stack, so probes work on IPv6-only clusters as well
            return _Server6(("::", port), handler)
        except OSError:
            pass  # no IPv6 on this host
    return _Server((host, port), handler)


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
