"""The pod-resources client against a fake kubelet in another process, and the loop on top."""

from __future__ import annotations

import random
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from allocwatch import podresources
from allocwatch.claims import ListError
from allocwatch.document import parse_document
from allocwatch.grpcruntime import open_channel
from allocwatch.metrics import PollOutcome
from allocwatch.podresources import PodResourcesClient
from allocwatch.shutdown import Interrupted, Shutdown
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.waiting import wait_until
from tests.conftest import A100_APERTURE, A100_HALF, A100_UUIDS
from tests.support.rig import FULL, HALF, IDLE, Rig, expected, memory
from tests.support.runqueue import OwnClock
from tests.support.slowaccept import SlowAcceptRelay

pytestmark = pytest.mark.timing


def test_claims_appear_and_disappear(rig: Rig) -> None:
    rig.start()
    wait_until(rig.shows({}), what="idle")
    rig.kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[1]])])
    wait_until(rig.shows({1: HALF}), what="device 1 busy")
    rig.kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[1]]), gpu_pod("ml", "b", [A100_UUIDS[1]])])
    wait_until(rig.shows({1: FULL}), what="device 1 full")
    rig.kubelet.set_pods([])
    wait_until(rig.shows({}), what="idle again")
    # the gauges are set just after the write
    wait_until(
        lambda: rig.metric("allocwatch_device_claims", index="1", uuid=A100_UUIDS[1]) == 0,
        what="the claims gauge back to 0",
    )


@pytest.mark.parametrize("name", ["q?x", "h#x", "pc%41", "sp ace"])
def test_socket_paths_with_uri_characters_are_reached(
    kubelet: FakePodResourcesLister, tmp_path: Path, name: str
) -> None:
    """grpc reads the target as a URI; a path with `?`, `#` or `%` must still work."""
    link = tmp_path / name / "kubelet.sock"
    link.parent.mkdir()
    link.symlink_to(kubelet.socket_path)
    kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[3]])])
    client = PodResourcesClient(str(link))
    try:
        assert client.wait_ready(5)
        assert [c.device_id for c in client.list_claims()] == [A100_UUIDS[3]]
    finally:
        client.close()


def test_kubelet_restart_is_survived(rig: Rig) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    wait_until(rig.shows({0: HALF}), what="before restart")
    rig.kubelet.stop()  # socket removed
    wait_until(
        lambda: (rig.metric("allocwatch_polls_total", result=PollOutcome.LIST_ERROR) or 0) > 0,
        what="a failed List while the kubelet is down",
    )
    assert memory(rig.overrides) == expected({0: HALF})  # previous reading kept
    rig.kubelet.set_pods([gpu_pod("ns", "b", [A100_UUIDS[5]])])
    rig.kubelet.start()  # socket re-created
    wait_until(rig.shows({5: HALF}), what="after restart")
    assert rig.thread is not None and rig.thread.is_alive()


def test_a_list_over_grpcs_default_4_mib_arrives_whole(rig: Rig) -> None:
    # A busy node's List outgrows grpc's default receive limit (4 MiB) and
    # many times the HTTP/2 flow-control window.
    padding = "x" * 700
    pods = [
        gpu_pod("web", f"pod-{i}-{padding}", [f"nic-{i}"], resource="example.com/nic")
        for i in range(7000)
    ]
    rig.kubelet.set_pods([*pods, gpu_pod("ml", "a", [A100_UUIDS[1]])])
    rig.start()
    # A guard against a hang, not a bound: the fake kubelet builds the 5 MB
    # from JSON and the watcher decodes it, seconds of CPU on a busy machine.
    wait_until(rig.shows({1: HALF}), timeout=60, what="the claim behind 5 MB of pods")


def test_a_pod_that_does_not_decode_fails_the_list_not_the_watcher(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    wait_until(rig.shows({0: HALF}), what="published")
    # it names a watched resource, so it is decoded, and it is cut short
    truncated = b"\x12\x40" + b"nvidia.com/gpu"
    rig.kubelet.set_raw_pods([truncated])
    rig.kubelet.set_pods([])
    wait_until(
        lambda: (rig.metric("allocwatch_polls_total", result=PollOutcome.LIST_ERROR) or 0) >= 3,
        what="failing polls",
    )
    assert rig.thread is not None and rig.thread.is_alive()
    assert memory(rig.overrides) == expected({0: HALF})
    assert "the response does not decode" in caplog.text
    rig.kubelet.set_raw_pods([])
    wait_until(rig.shows({}), what="recovered")


def test_lister_always_failing_publishes_nothing(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    kubelet.set_failure("INTERNAL")
    r = Rig(kubelet, driver_root, interval=0.005)
    try:
        r.start()
        wait_until(lambda: kubelet.list_calls() > 1, what="repeated List calls")
    finally:
        r.close()
    assert not r.overrides.exists()


def test_hung_kubelet_hits_the_deadline(
    kubelet: FakePodResourcesLister, driver_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet.set_hang(30)
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    clock = OwnClock()
    assert r.watcher.poll() == PollOutcome.LIST_ERROR
    assert clock.seconds() < 2.0  # call_timeout is 0.5 s
    # The error names the socket it could not list, like every other error.
    assert f"list pod resources at {kubelet.socket_path}: DEADLINE_EXCEEDED" in caplog.text
    kubelet.set_hang(0)
    assert r.watcher.poll() == PollOutcome.OK
    r.close()


def test_a_kubelet_slow_to_answer_a_new_connection_is_still_listed(
    kubelet: FakePodResourcesLister, short_tmp: Path
) -> None:
    # grpc gives up on a connection that has not seen the server's SETTINGS
    # by its connect timeout; only List's deadline may end this wait.
    kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[0]])])
    with SlowAcceptRelay(short_tmp / "slow.sock", kubelet.socket_path, delay=2.0) as relay:
        client = PodResourcesClient(relay.socket_path, call_timeout=5.0)
        try:
            started = time.monotonic()
            claims = client.list_claims()
            assert time.monotonic() - started >= 2.0
        finally:
            client.close()
    assert [c.device_id for c in claims] == [A100_UUIDS[0]]


@pytest.fixture
def fast_rig(kubelet: FakePodResourcesLister, driver_root: Path) -> Iterator[Rig]:
    r = Rig(kubelet, driver_root, interval=0.005)
    yield r
    r.close()


def test_500_random_changes_end_in_exactly_the_final_state(fast_rig: Rig) -> None:
    rng = random.Random(20261202)
    rig = fast_rig
    rig.start()
    pods: list[dict[str, object]] = []
    for step in range(500):
        if pods and rng.random() < 0.45:
            pods.pop(rng.randrange(len(pods)))
        else:
            ids = rng.sample(A100_UUIDS, rng.choice([1, 1, 2]))
            if rng.random() < 0.2:
                ids = [f"{ids[0]}::{rng.randrange(4)}"]
            pods.append(gpu_pod("ns", f"p{step}", ids))
        rig.kubelet.set_pods(list(pods))  # type: ignore[arg-type]
        # Every change is seen by some List: the kubelet counts a call before
        # it reads its state, so a count above this one read the new pods.
        seen = rig.kubelet.list_calls()
        wait_until(lambda n=seen: rig.kubelet.list_calls() > n, what=f"a List after change {step}")
    claims = [0] * 8
    for pod in pods:
        for dev in pod["containers"][0]["devices"][0]["device_ids"]:  # type: ignore[index]
            claims[A100_UUIDS.index(dev.split("::")[0])] += 1
    final = {
        i: {
            "used_bytes": min(n * A100_HALF, A100_APERTURE),
            "free_bytes": A100_APERTURE - min(n * A100_HALF, A100_APERTURE),
        }
        for i, n in enumerate(claims)
        if n
    }
    wait_until(rig.shows(final), what="the final state")
    want = {i: final.get(i, IDLE)["used_bytes"] for i in range(8)}

    def gauges() -> dict[int, float | None]:
        return {
            i: rig.metric("allocwatch_device_used_bytes", index=str(i), uuid=A100_UUIDS[i])
            for i in range(8)
        }

    wait_until(lambda: gauges() == want, what="the used-bytes gauges")


def test_missing_socket_is_reported_by_the_dial(short_tmp: Path) -> None:
    client = PodResourcesClient(str(short_tmp / "absent.sock"))
    started, clock = time.monotonic(), OwnClock()
    assert not client.wait_ready(2)
    assert time.monotonic() - started > 1.5  # waited, however busy the machine
    assert clock.seconds() < 5  # and not much longer, less waits for a CPU
    client.close()


def test_a_shutdown_signal_while_a_failed_call_is_handled_does_not_escape(
    short_tmp: Path,
) -> None:
    """The stop-signal handler raises Interrupted only while a call is in flight.

    Here it lands while the channel of a failed call is being closed: the
    dial must end as a stopped dial, and List with its own error, rather
    than let Interrupted out of an exception handler.
    """
    for call in ("dial", "list"):
        shutdown = Shutdown()
        client = PodResourcesClient(str(short_tmp / "absent.sock"), shutdown=shutdown)
        real_close = client.close

        def close_as_a_signal_lands(shutdown: Shutdown = shutdown, close=real_close) -> None:
            shutdown.handle_signal(signal.SIGTERM, None)  # raises only while in a call
            close()

        client.close = close_as_a_signal_lands  # type: ignore[method-assign]
        try:
            if call == "dial":
                assert client.wait_ready(5) is False
            else:
                with pytest.raises(ListError, match="UNAVAILABLE"):
                    client.list_claims()
            assert shutdown.is_set()
            shutdown.handle_signal(signal.SIGTERM, None)  # raises Interrupted inside a call
        finally:
            real_close()


def _first_headers_frame(listener: socket.socket) -> bytes:
    """Accept one HTTP/2 client, greet it, and return the payload of its first HEADERS frame."""
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(10)
        conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an empty SETTINGS frame
        data = b""
        offset = len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")  # the client preface
        while True:
            while len(data) < offset + 9:
                chunk = conn.recv(65536)
                if not chunk:
                    raise AssertionError("the client closed before sending HEADERS")
                data += chunk
            length = int.from_bytes(data[offset : offset + 3], "big")
            kind = data[offset + 3]
            while len(data) < offset + 9 + length:
                data += conn.recv(65536)
            if kind == 0x1:
                return data[offset + 9 : offset + 9 + length]
            offset += 9 + length


def test_the_channel_names_localhost_as_its_authority(short_tmp: Path) -> None:
    """The kubelet dials its plugins as `localhost`; left alone, grpc would send the
    %-encoded socket path, which strict HTTP/2 servers refuse."""
    path = short_tmp / "kubelet.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(10)
        client = PodResourcesClient(str(path), call_timeout=2)
        headers: list[bytes] = []
        server = threading.Thread(target=lambda: headers.append(_first_headers_frame(listener)))
        server.start()
        try:
            with pytest.raises(ListError):
                client.list_claims()  # never answered
        finally:
            server.join(10)
            client.close()
    assert headers, "no HEADERS frame arrived"
    assert b"localhost" in headers[0]
    assert b"kubelet.sock" not in headers[0] and b"%2F" not in headers[0]


def test_a_call_not_yet_started_when_shutdown_began_is_not_made(
    kubelet: FakePodResourcesLister,
) -> None:
    """A signal handled before the call began (say, while the channel was
    made) must not leave List to wait out its deadline on a hung kubelet."""
    shutdown = Shutdown()
    client = PodResourcesClient(kubelet.socket_path, call_timeout=30, shutdown=shutdown)
    try:
        assert client.wait_ready(5)
        kubelet.set_hang(30)
        calls = kubelet.list_calls()
        shutdown.handle_signal(signal.SIGTERM, None)  # no call in flight: only stops
        clock = OwnClock()
        with pytest.raises(Interrupted):
            client.list_claims()
        assert clock.seconds() < 1.0
        assert kubelet.list_calls() == calls
        shutdown.handle_signal(signal.SIGTERM, None)  # raises Interrupted inside a call
        assert client.wait_ready(5) is False  # the dial's probe too
    finally:
        kubelet.set_hang(0)
        client.close()


def test_the_dial_finds_a_kubelet_that_starts_late(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []

    def counting_open_channel(socket_path: str) -> grpc.Channel:
        opened.append(socket_path)
        return open_channel(socket_path)

    monkeypatch.setattr(podresources, "open_channel", counting_open_channel)
    kubelet = FakePodResourcesLister(short_tmp / "late.sock")
    client = PodResourcesClient(kubelet.socket_path)
    dialled: list[bool] = []
    clock: list[OwnClock] = []

    def dial_and_mark() -> None:
        dialled.append(client.wait_ready(20))
        if clock:
            clock[0].mark()

    dial = threading.Thread(target=dial_and_mark)
    dial.start()
    try:
        # A second channel: the first attempt found no socket and was retried.
        wait_until(lambda: len(opened) >= 2, what="a retried dial")
        kubelet.start()
        clock.append(OwnClock(dial))
        dial.join(10)
        assert dialled == [True]
        assert clock[0].seconds() < 3
    finally:
        kubelet.stop()
        dial.join(20)
        client.close()


def test_the_dial_leaves_no_thread_behind(kubelet: FakePodResourcesLister) -> None:
    # grpc.channel_ready_future would: a thread watching the channel on
    # grpc's (slack-delayed) timers, which closing the channel then waits for.
    before = set(threading.enumerate())
    client = PodResourcesClient(kubelet.socket_path)
    try:
        assert client.wait_ready(5)
        assert set(threading.enumerate()) == before
    finally:
        client.close()


def test_fast_interval_polls_repeatedly_and_stops_cleanly(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[0]])])
    r = Rig(kubelet, driver_root, interval=0.005)
    r.start()
    wait_until(lambda: kubelet.list_calls() > 1, what="more than one List")
    r.close()  # asserts the loop thread returned
    assert memory(r.overrides)["0"] == HALF


def process_names(path: Path) -> dict[str, list[str]]:
    doc = parse_document(path.read_text())
    return {
        k: [p["name"] for p in v["processes"]]
        for k, v in doc.get("devices", {}).items()
        if "processes" in v
    }


def test_claims_are_published_as_processes_and_go_with_them(rig: Rig) -> None:
    rig.start()
    wait_until(rig.shows({}), what="idle")
    assert process_names(rig.overrides) == {}
    rig.kubelet.set_pods(
        [
            gpu_pod("ml", "a", [A100_UUIDS[1]], container="app"),
            gpu_pod("ml", "b", [A100_UUIDS[1], A100_UUIDS[4]]),
        ]
    )
    wait_until(rig.shows({1: FULL, 4: HALF}), what="devices 1 and 4 busy")
    wait_until(
        lambda: (
            process_names(rig.overrides) == {"1": ["ml/a/app", "ml/b/main"], "4": ["ml/b/main"]}
        ),
        what="the processes",
    )
    pids = {
        k: [p["pid"] for p in v["processes"]]
        for k, v in parse_document(rig.overrides.read_text())["devices"].items()
        if "processes" in v
    }
    assert len(set(pids["1"])) == 2
    writes = rig.metric("allocwatch_writes_total")
    polls = rig.polls()
    wait_until(lambda: rig.polls() >= polls + 10, what="10 more polls")
    assert rig.metric("allocwatch_writes_total") == writes  # nothing changed, nothing written
    rig.overrides.unlink()
    wait_until(
        lambda: rig.overrides.exists() and "1" in process_names(rig.overrides), what="restored"
    )
    rig.kubelet.set_pods([gpu_pod("ml", "b", [A100_UUIDS[4]])])
    wait_until(lambda: process_names(rig.overrides) == {"4": ["ml/b/main"]}, what="a gone")
    rig.kubelet.set_pods([])
    wait_until(rig.shows({}), what="idle again")
    wait_until(lambda: process_names(rig.overrides) == {}, what="no processes key left")
