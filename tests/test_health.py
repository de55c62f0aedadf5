"""The /metrics, /healthz and /readyz server on real sockets."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from allocwatch.health import HealthServer
from allocwatch.metrics import Metrics
from tests.test_watch import eventually


def test_metrics_address_without_host_serves_ipv4_and_ipv6() -> None:
    server = HealthServer(":0", Metrics(), lambda: (True, "ok"))
    server.start()
    try:
        for host in ("127.0.0.1", "[::1]"):
            with urllib.request.urlopen(f"http://{host}:{server.port}/healthz", timeout=5) as r:
                assert r.read() == b"ok\n"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("ready", "path", "status"),
    [
        (True, "/healthz", 200),
        (True, "/readyz", 200),
        (False, "/readyz", 503),
        (True, "/metrics", 200),
        (True, "/nothing", 404),
    ],
)
def test_health_server_answers_head_as_get_without_a_body(
    ready: bool, path: str, status: int
) -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: (ready, "why"))
    server.start()
    try:
        answers = []
        for method in ("GET", "HEAD"):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
            conn.request(method, path)
            response = conn.getresponse()
            answers.append((response.status, response.getheader("Content-Length"), response.read()))
            conn.close()
        (get_status, get_length, get_body), (head_status, head_length, head_body) = answers
        assert get_status == head_status == status
        assert head_length == get_length == str(len(get_body)) and get_body
        assert head_body == b""
    finally:
        server.stop()


def test_health_server_sleeps_until_a_request_and_stops_at_once() -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: (True, "ok"))
    server.start()
    try:
        (thread,) = [t for t in threading.enumerate() if t.name == "health"]
        task = Path(f"/proc/self/task/{thread.native_id}")
        eventually(lambda: (task / "stat").read_text().split(")")[1].split()[0] == "S")
        # schedstat's third field counts the times the thread was scheduled
        runs = int((task / "schedstat").read_text().split()[2])
        time.sleep(1.2)  # serve_forever's half-second shutdown check would wake it twice
        assert int((task / "schedstat").read_text().split()[2]) == runs
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        started = time.monotonic()
        server.stop()
    assert time.monotonic() - started < 0.2
    assert not thread.is_alive()


def test_health_server_drops_a_client_that_sends_nothing() -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: (True, "ok"), idle_timeout=0.2)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as idle:
            assert idle.recv(1) == b""  # closed by the server, not by our 5 s timeout
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        server.stop()
