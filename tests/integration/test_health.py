"""The /metrics, /healthz and /readyz server on real sockets."""

from __future__ import annotations

import http.client
import logging
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from allocwatch.health import MAX_CONNECTIONS, HealthServer
from allocwatch.metrics import Metrics
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.waiting import wait_until
from tests.conftest import A100_HALF, A100_UUIDS
from tests.support import REPO_ROOT
from tests.support.rig import memory
from tests.support.runqueue import OwnClock

pytestmark = pytest.mark.timing


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

        def waiting_for_io() -> bool:
            # Asleep, and not on a futex: a thread that has only just started
            # sleeps on the GIL first, and runs again when it gets it.
            asleep = (task / "stat").read_text().split(")")[1].split()[0] == "S"
            return asleep and "futex" not in (task / "wchan").read_text()

        wait_until(waiting_for_io, what="the health thread waiting for a connection")
        # schedstat's third field counts the times the thread was scheduled
        runs = int((task / "schedstat").read_text().split()[2])
        time.sleep(1.2)  # serve_forever's half-second shutdown check would wake it twice
        assert int((task / "schedstat").read_text().split()[2]) == runs
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        clock = OwnClock()
        server.stop()
    assert clock.seconds() < 0.2
    assert not thread.is_alive()


def test_health_server_drops_a_client_that_sends_nothing() -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: (True, "ok"), request_timeout=0.2)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as idle:
            assert idle.recv(1) == b""  # closed by the server, not by our 5 s timeout
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        server.stop()


def test_a_client_that_resets_its_connection_costs_one_debug_line_not_a_traceback(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: (True, "ok"))
    server.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="allocwatch.health"):
            for _ in range(20):
                client = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                client.sendall(b"GET /metr")
                # SO_LINGER 0: close() sends a reset, not a FIN
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
            wait_until(
                lambda: sum("reset" in r.getMessage() for r in caplog.records) == 20,
                what="20 resets logged",
            )
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err
    assert all(len(r.getMessage().splitlines()) == 1 for r in caplog.records)


def test_connections_over_the_cap_close_the_oldest_and_a_probe_is_answered() -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), lambda: (True, "ok"), request_timeout=30)
    server.start()
    slow = []
    try:
        for _ in range(MAX_CONNECTIONS * 4):
            client = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            client.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            slow.append(client)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
        # every connection but the newest MAX_CONNECTIONS was closed by the server:
        # a FIN, or a reset when its unread request bytes were still queued there
        try:
            closed = slow[0].recv(1) == b""
        except ConnectionResetError:
            closed = True
        assert closed
        server_fds = len(os.listdir("/proc/self/fd"))
        assert server_fds < len(slow) + MAX_CONNECTIONS + 30
    finally:
        for client in slow:
            client.close()
        server.stop()


def _nofile(limit: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return lower


def test_a_slowloris_leaves_publishing_and_healthz_working_under_a_low_fd_limit(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    """Hundreds of connections that never finish their request, against the real watcher."""
    target = driver_root / "config" / "overrides.yaml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "allocwatch", "--socket", kubelet.socket_path,
         "--driver-root", str(driver_root), "--interval", "100ms",
         "--metrics-address", "127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, preexec_fn=_nofile(128),
    )  # fmt: skip
    slow: list[socket.socket] = []
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            if m := re.search(r"on port (\d+)", line):
                port = int(m.group(1))
                break
        assert port is not None, "the watcher exited before serving metrics"
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        wait_until(target.exists, what="the first publish")
        for _ in range(400):
            client = socket.socket()
            client.settimeout(5)
            client.connect(("127.0.0.1", port))
            client.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            slow.append(client)
        kubelet.set_pods([gpu_pod("ml", "t", [A100_UUIDS[3]])])
        wait_until(
            lambda: memory(target).get("3", {}).get("used_bytes") == A100_HALF,
            what="the claim published under the slowloris",
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.read() == b"ok\n"
        assert len(os.listdir(f"/proc/{proc.pid}/fd")) < 100
    finally:
        for client in slow:
            client.close()
        proc.kill()
        proc.wait()
