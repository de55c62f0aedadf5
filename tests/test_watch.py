"""The watch loop against a fake kubelet in another process (integration)."""

from __future__ import annotations

import logging
import random
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from allocwatch import podresources
from allocwatch.claims import ListError
from allocwatch.grpcruntime import open_channel
from allocwatch.metrics import Metrics
from allocwatch.outcome import PollOutcome
from allocwatch.overrides import parse_document
from allocwatch.podresources import PodResourcesClient
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher
from allocwatch.shutdown import Interrupted, Shutdown
from allocwatch.watch import Watcher
from fakekubelet import FakeKubelet, gpu_pod
from tests.conftest import A100, A100_APERTURE, A100_HALF, A100_UUIDS
from tests.support.slowaccept import SlowAcceptRelay

IDLE = {"used_bytes": 0, "free_bytes": A100_APERTURE}
HALF = {"used_bytes": A100_HALF, "free_bytes": A100_APERTURE - A100_HALF}
FULL = {"used_bytes": A100_APERTURE, "free_bytes": 0}


def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.01)


def memory(path: Path) -> dict[str, dict[str, int]]:
    doc = parse_document(path.read_text())
    return {k: v["memory"] for k, v in doc.get("devices", {}).items() if "memory" in v}


def expected(busy: dict[int, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {str(i): busy.get(i, IDLE) for i in range(8)}


class Rig:
    def __init__(self, kubelet: FakeKubelet, driver_root: Path, interval: float = 0.02) -> None:
        self.kubelet = kubelet
        self.profile = driver_root / "config" / "config.yaml"
        self.overrides = driver_root / "config" / "overrides.yaml"
        self.client = PodResourcesClient(kubelet.socket_path, call_timeout=0.5)
        self.metrics = Metrics()
        self.watcher = Watcher(
            self.client,
            ProfileSource(self.profile),
            OverridesPublisher(self.overrides, lock_timeout=1),
            fraction=0.5,
            interval=interval,
            metrics=self.metrics,
        )
        self.stop = Shutdown()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        assert self.client.wait_ready(5)
        self.thread = threading.Thread(target=self.watcher.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join(5)
            assert not self.thread.is_alive()
        self.client.close()

    def shows(self, busy: dict[int, dict[str, int]]) -> Callable[[], bool]:
        def check() -> bool:
            return self.overrides.exists() and memory(self.overrides) == expected(busy)

        return check

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


@pytest.fixture
def rig(kubelet: FakeKubelet, driver_root: Path) -> Iterator[Rig]:
    r = Rig(kubelet, driver_root)
    yield r
    r.close()


def test_first_publish_before_first_tick(kubelet: FakeKubelet, driver_root: Path) -> None:
    kubelet.set_pods([gpu_pod("ml", "trainer", [A100_UUIDS[0]])])
    r = Rig(kubelet, driver_root, interval=3600)
    try:
        r.start()
        eventually(r.shows({0: HALF}), timeout=5, what="the immediate publish")
        assert r.watcher.polls == 1
    finally:
        r.close()


def test_claims_appear_and_disappear(rig: Rig) -> None:
    rig.start()
    eventually(rig.shows({}), what="idle")
    rig.kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[1]])])
    eventually(rig.shows({1: HALF}), what="device 1 busy")
    rig.kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[1]]), gpu_pod("ml", "b", [A100_UUIDS[1]])])
    eventually(rig.shows({1: FULL}), what="device 1 full")
    rig.kubelet.set_pods([])
    eventually(rig.shows({}), what="idle again")
    # the gauges are set just after the write
    eventually(
        lambda: rig.metric("allocwatch_device_claims", index="1", uuid=A100_UUIDS[1]) == 0,
        what="the claims gauge back to 0",
    )


def test_claims_gauge_moves_when_the_reading_is_clamped(rig: Rig) -> None:
    # A third claim on a full device leaves its reading as it is; the claims
    # gauge must still count it.
    pods = [gpu_pod("ml", name, [A100_UUIDS[2]]) for name in ("a", "b", "c")]
    rig.kubelet.set_pods(pods[:2])
    rig.start()
    eventually(rig.shows({2: FULL}), what="device 2 full")
    eventually(
        lambda: rig.metric("allocwatch_device_claims", index="2", uuid=A100_UUIDS[2]) == 2,
        what="two claims",
    )
    rig.kubelet.set_pods(pods)
    eventually(
        lambda: rig.metric("allocwatch_device_claims", index="2", uuid=A100_UUIDS[2]) == 3,
        what="three claims on an unchanged reading",
    )
    assert memory(rig.overrides) == expected({2: FULL})


def test_time_sliced_and_renamed_resources(rig: Rig) -> None:
    rig.start()
    rig.kubelet.set_pods(
        [
            gpu_pod("ns", "a", [A100_UUIDS[3] + "::0"]),
            gpu_pod("ns", "b", [A100_UUIDS[3] + "::1"], resource="nvidia.com/gpu.shared"),
        ]
    )
    eventually(rig.shows({3: FULL}), what="two replicas on device 3")


def test_unknown_ids_are_counted_and_logged_once_per_change(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rig.start()
    rig.kubelet.set_pods([gpu_pod("ns", "a", ["GPU-not-in-profile", "0"])])
    eventually(lambda: rig.metric("allocwatch_unknown_device_ids") == 2, what="unknown ids")
    assert memory(rig.overrides) == expected({})
    polls = rig.watcher.polls
    eventually(lambda: rig.watcher.polls > polls + 3, what="more quiet polls")
    assert caplog.text.count("ids matching no profile device: 0, GPU-not-in-profile") == 1
    rig.kubelet.set_pods([])
    eventually(lambda: rig.metric("allocwatch_unknown_device_ids") == 0, what="none unknown")
    eventually(lambda: "matches a profile device again" in caplog.text, what="the change logged")


def test_idle_node_makes_zero_writes(rig: Rig) -> None:
    rig.start()
    eventually(rig.shows({}), what="first publish")
    polls_before = rig.watcher.polls
    mtime, inode = rig.overrides.stat().st_mtime_ns, rig.overrides.stat().st_ino
    eventually(lambda: rig.watcher.polls >= polls_before + 25, what="25 idle polls")
    assert rig.overrides.stat().st_ino == inode  # never replaced
    assert rig.metric("allocwatch_writes_total") == 1
    assert rig.overrides.stat().st_mtime_ns == mtime


def test_deleted_file_restored_next_poll(rig: Rig) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[2]])])
    rig.start()
    eventually(rig.shows({2: HALF}), what="published")
    rig.overrides.unlink()
    eventually(rig.shows({2: HALF}), what="restored")


@pytest.mark.parametrize("name", ["q?x", "h#x", "pc%41", "sp ace"])
def test_socket_paths_with_uri_characters_are_reached(
    kubelet: FakeKubelet, tmp_path: Path, name: str
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
    eventually(rig.shows({0: HALF}), what="before restart")
    rig.kubelet.stop()  # socket removed
    eventually(
        lambda: (rig.metric("allocwatch_polls_total", result=PollOutcome.LIST_ERROR) or 0) > 0,
        what="a failed List while the kubelet is down",
    )
    assert memory(rig.overrides) == expected({0: HALF})  # previous reading kept
    rig.kubelet.set_pods([gpu_pod("ns", "b", [A100_UUIDS[5]])])
    rig.kubelet.start()  # socket re-created
    eventually(rig.shows({5: HALF}), what="after restart")
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
    eventually(rig.shows({1: HALF}), timeout=20, what="the claim behind 5 MB of pods")


def test_list_errors_keep_the_previous_reading(rig: Rig) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    eventually(rig.shows({0: HALF}), what="published")
    rig.kubelet.set_failure("UNAVAILABLE")
    rig.kubelet.set_pods([])
    eventually(
        lambda: (rig.metric("allocwatch_polls_total", result=PollOutcome.LIST_ERROR) or 0) >= 3,
        what="failing polls",
    )
    assert memory(rig.overrides) == expected({0: HALF})
    rig.kubelet.set_failure(None)
    eventually(rig.shows({}), what="recovered")


def test_a_failing_list_is_logged_once_not_every_poll(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # Each failed List opens a new channel, and about one connect in 60 waits
    # for one of grpc's late timers (bench/README.md): past the rig's 0.5 s
    # deadline, that would be a second, different error.
    rig.client.call_timeout = 5
    assert rig.client.wait_ready(5)
    assert rig.watcher.poll().result == PollOutcome.OK
    rig.kubelet.set_failure("UNAVAILABLE")
    for _ in range(3):
        assert rig.watcher.poll().result == PollOutcome.LIST_ERROR
    assert caplog.text.count("UNAVAILABLE") == 1, caplog.text
    rig.kubelet.set_failure(None)
    assert rig.watcher.poll().result == PollOutcome.OK
    assert caplog.text.count("recovered: publishing again") == 1


def test_a_pod_that_does_not_decode_fails_the_list_not_the_watcher(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    eventually(rig.shows({0: HALF}), what="published")
    # it names a watched resource, so it is decoded, and it is cut short
    truncated = b"\x12\x40" + b"nvidia.com/gpu"
    rig.kubelet.set_raw_pods([truncated])
    rig.kubelet.set_pods([])
    eventually(
        lambda: (rig.metric("allocwatch_polls_total", result=PollOutcome.LIST_ERROR) or 0) >= 3,
        what="failing polls",
    )
    assert rig.thread is not None and rig.thread.is_alive()
    assert memory(rig.overrides) == expected({0: HALF})
    assert "the response does not decode" in caplog.text
    rig.kubelet.set_raw_pods([])
    eventually(rig.shows({}), what="recovered")


def test_lister_always_failing_publishes_nothing(kubelet: FakeKubelet, driver_root: Path) -> None:
    kubelet.set_failure("INTERNAL")
    r = Rig(kubelet, driver_root, interval=0.005)
    try:
        r.start()
        eventually(lambda: kubelet.list_calls() > 1, what="repeated List calls")
    finally:
        r.close()
    assert not r.overrides.exists()


def test_hung_kubelet_hits_the_deadline(
    kubelet: FakeKubelet, driver_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet.set_hang(30)
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    started = time.monotonic()
    assert r.watcher.poll().result == PollOutcome.LIST_ERROR
    assert time.monotonic() - started < 2.0  # call_timeout is 0.5 s
    # The error names the socket it could not list, like every other error.
    assert f"list pod resources at {kubelet.socket_path}: DEADLINE_EXCEEDED" in caplog.text
    kubelet.set_hang(0)
    assert r.watcher.poll().result == PollOutcome.OK
    r.close()


def test_a_kubelet_slow_to_answer_a_new_connection_is_still_listed(
    kubelet: FakeKubelet, short_tmp: Path
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


def test_profile_missing_then_appearing(kubelet: FakeKubelet, tmp_path: Path) -> None:
    driver = tmp_path / "driver"
    r = Rig(kubelet, driver)
    assert r.client.wait_ready(5)
    assert r.watcher.poll().result == PollOutcome.NO_PROFILE
    assert not driver.exists()  # nothing created
    ready, why = r.watcher.ready()
    assert not ready and "missing" in why
    r.profile.parent.mkdir(parents=True)
    shutil.copy(A100, r.profile)
    assert r.watcher.poll().result == PollOutcome.OK
    assert memory(r.overrides) == expected({})
    assert r.watcher.ready() == (True, "ok")
    r.close()


def test_a_failed_poll_is_retried_within_a_second_at_a_long_interval(
    kubelet: FakeKubelet, tmp_path: Path
) -> None:
    r = Rig(kubelet, tmp_path / "driver", interval=3600)
    r.start()
    try:
        eventually(lambda: r.watcher.polls >= 1, what="the first poll")
        r.profile.parent.mkdir(parents=True)
        shutil.copy(A100, r.profile)
        eventually(r.overrides.exists, timeout=5, what="a publish long before the hour")
        assert memory(r.overrides) == expected({})
    finally:
        r.close()


def test_malformed_profile_keeps_last_good_devices(kubelet: FakeKubelet, driver_root: Path) -> None:
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    assert r.watcher.poll().result == PollOutcome.OK
    r.profile.write_text("version: [broken")
    kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[4]])])
    assert r.watcher.poll().result == PollOutcome.OK
    assert memory(r.overrides) == expected({4: HALF})
    r.close()


def test_profile_change_is_picked_up(
    kubelet: FakeKubelet, driver_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="allocwatch")
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    r.watcher.poll()
    text = A100.read_text().replace("12345678000", "abcdef00000")
    r.profile.write_text(
        text.replace(
            'driver_version: "550.163.01"', 'driver_version: "550.163.01"\n  num_devices: 2'
        )
    )
    kubelet.set_pods([gpu_pod("ns", "a", ["GPU-12345678-1234-1234-1234-abcdef000001"])])
    assert r.watcher.poll().result == PollOutcome.OK
    assert memory(r.overrides) == {"0": IDLE, "1": HALF}  # devices 2..7 removed
    # The log says what changed, not that someone edited the file.
    for index in range(2, 8):
        assert f"device {index}: reading removed" in caplog.text
    assert "rewrote" not in caplog.text
    r.close()


def test_device_metrics_follow_a_uuid_change(kubelet: FakeKubelet, driver_root: Path) -> None:
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    r.watcher.poll()
    assert r.metric("allocwatch_device_used_bytes", index="0", uuid=A100_UUIDS[0]) == 0
    # Same devices, same (idle) readings, new uuids: the old series must go.
    r.profile.write_text(A100.read_text().replace("12345678000", "abcdef00000"))
    assert r.watcher.poll().result == PollOutcome.OK
    new_uuid = A100_UUIDS[0].replace("12345678000", "abcdef00000")
    assert r.metric("allocwatch_device_used_bytes", index="0", uuid=A100_UUIDS[0]) is None
    assert r.metric("allocwatch_device_used_bytes", index="0", uuid=new_uuid) == 0
    r.close()


def test_a_device_without_memory_gets_claims_but_no_reading(
    kubelet: FakeKubelet, driver_root: Path
) -> None:
    # Device 3 has no memory block of its own and no defaults to inherit.
    profile = A100.read_text().replace(
        "  memory:\n    total_bytes", "  memory_off:\n    total_bytes"
    )
    memory_block = "\n    memory: {total_bytes: 42949672960, reserved_bytes: 611319808}"
    for i in (0, 1, 2, 4, 5, 6, 7):
        uuid_line = f'    uuid: "{A100_UUIDS[i]}"'
        profile = profile.replace(uuid_line, uuid_line + memory_block)
    r = Rig(kubelet, driver_root)
    r.profile.write_text(profile)
    assert r.client.wait_ready(5)
    kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[3]]), gpu_pod("ns", "b", [A100_UUIDS[1]])])
    assert r.watcher.poll().result == PollOutcome.OK
    want = {str(i): IDLE for i in (0, 2, 4, 5, 6, 7)} | {"1": HALF}
    assert memory(r.overrides) == want  # nothing for device 3: its base values stand
    assert r.metric("allocwatch_unknown_device_ids") == 0
    assert r.metric("allocwatch_device_claims", index="3", uuid=A100_UUIDS[3]) == 1
    assert r.metric("allocwatch_device_used_bytes", index="3", uuid=A100_UUIDS[3]) is None
    # Back to the profile with memory for all: device 3 is published too.
    shutil.copy(A100, r.profile)
    assert r.watcher.poll().result == PollOutcome.OK
    assert memory(r.overrides) == expected({1: HALF, 3: HALF})
    assert r.metric("allocwatch_device_used_bytes", index="3", uuid=A100_UUIDS[3]) == A100_HALF
    r.close()


def test_device_metrics_go_with_the_profile(kubelet: FakeKubelet, driver_root: Path) -> None:
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[2]])])
    assert r.watcher.poll().result == PollOutcome.OK
    assert (
        r.metric("allocwatch_device_used_bytes", index="2", uuid=A100_UUIDS[2])
        == HALF["used_bytes"]
    )
    r.profile.unlink()
    assert r.watcher.poll().result == PollOutcome.NO_PROFILE
    assert r.metric("allocwatch_device_used_bytes", index="2", uuid=A100_UUIDS[2]) is None
    shutil.copy(A100, r.profile)
    assert r.watcher.poll().result == PollOutcome.OK
    assert (
        r.metric("allocwatch_device_used_bytes", index="2", uuid=A100_UUIDS[2])
        == HALF["used_bytes"]
    )
    r.close()


def test_unreadable_paths_fail_the_poll_not_the_watcher(
    kubelet: FakeKubelet, driver_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = Rig(kubelet, driver_root)
    assert r.client.wait_ready(5)
    r.overrides.mkdir()  # a directory where the file should be
    assert r.watcher.poll().result == PollOutcome.PUBLISH_ERROR
    assert f"load {r.overrides}: Is a directory" in caplog.text
    r.overrides.rmdir()
    assert r.watcher.poll().result == PollOutcome.OK
    blocker = driver_root / "file"
    blocker.write_text("")
    r.watcher.profile = ProfileSource(blocker / "config.yaml")  # under a regular file
    assert r.watcher.poll().result == PollOutcome.NO_PROFILE
    assert f"profile {blocker / 'config.yaml'}: Not a directory" in caplog.text
    r.close()


def test_refused_document_is_retried_not_overwritten(rig: Rig) -> None:
    rig.overrides.write_text("owner: someone\n")
    rig.start()
    eventually(
        lambda: (rig.metric("allocwatch_polls_total", result=PollOutcome.PUBLISH_ERROR) or 0) >= 2,
        what="refused publishes",
    )
    assert rig.overrides.read_text() == "owner: someone\n"
    rig.overrides.write_text("all: {performance_state: P8}\n")
    eventually(rig.shows({}), what="published once the document is valid")
    assert parse_document(rig.overrides.read_text())["all"] == {"performance_state": "P8"}


@pytest.fixture
def fast_rig(kubelet: FakeKubelet, driver_root: Path) -> Iterator[Rig]:
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
        eventually(lambda n=seen: rig.kubelet.list_calls() > n, what=f"a List after change {step}")
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
    eventually(rig.shows(final), what="the final state")
    want = {i: final.get(i, IDLE)["used_bytes"] for i in range(8)}

    def gauges() -> dict[int, float | None]:
        return {
            i: rig.metric("allocwatch_device_used_bytes", index=str(i), uuid=A100_UUIDS[i])
            for i in range(8)
        }

    eventually(lambda: gauges() == want, what="the used-bytes gauges")


def test_remove_readings_on_exit_leaves_no_memory_keys(rig: Rig) -> None:
    rig.overrides.write_text("devices: {'0': {thermal: {t: 1}}}\n")
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    eventually(rig.shows({0: HALF}), what="published")
    rig.close()
    assert rig.watcher.remove_readings(timeout=1)
    assert parse_document(rig.overrides.read_text()) == {
        "version": 1,
        "devices": {"0": {"thermal": {"t": 1}}},
    }


def test_a_deleted_profile_makes_the_watcher_unready_at_once(rig: Rig) -> None:
    assert rig.client.wait_ready(5)
    assert rig.watcher.poll().result == PollOutcome.OK
    assert rig.watcher.ready()[0]
    rig.profile.unlink()
    assert rig.watcher.poll().result == PollOutcome.NO_PROFILE
    ready, why = rig.watcher.ready()
    assert not ready and "missing" in why


def test_ready_tracks_recent_success(kubelet: FakeKubelet, driver_root: Path) -> None:
    now = [100.0]
    r = Rig(kubelet, driver_root, interval=1.0)
    r.watcher.clock = lambda: now[0]
    assert r.client.wait_ready(5)
    assert not r.watcher.ready()[0]
    assert r.watcher.poll().result == PollOutcome.OK
    assert r.watcher.ready()[0]
    now[0] += 2.9
    assert r.watcher.ready()[0]
    now[0] += 0.2
    ready, why = r.watcher.ready()
    assert not ready and "last successful poll" in why
    r.close()


def test_byte_counts_are_written_as_integers(rig: Rig) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    eventually(rig.shows({0: HALF}), what="published")
    text = rig.overrides.read_text()
    assert f"used_bytes: {A100_HALF}\n" in text and "e+" not in text and ".0" not in text


def test_missing_socket_is_reported_by_the_dial(short_tmp: Path) -> None:
    client = PodResourcesClient(str(short_tmp / "absent.sock"))
    started = time.monotonic()
    assert not client.wait_ready(2)
    assert 1.5 < time.monotonic() - started < 5
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
            assert shutdown.is_set() and not shutdown.in_call
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


def test_a_call_not_yet_started_when_shutdown_began_is_not_made(kubelet: FakeKubelet) -> None:
    """A signal handled before the call began (say, while the channel was
    made) must not leave List to wait out its deadline on a hung kubelet."""
    shutdown = Shutdown()
    client = PodResourcesClient(kubelet.socket_path, call_timeout=30, shutdown=shutdown)
    try:
        assert client.wait_ready(5)
        kubelet.set_hang(30)
        calls = kubelet.list_calls()
        shutdown.handle_signal(signal.SIGTERM, None)  # no call in flight: only stops
        started = time.monotonic()
        with pytest.raises(Interrupted):
            client.list_claims()
        assert time.monotonic() - started < 1.0
        assert kubelet.list_calls() == calls
        assert not shutdown.in_call
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
    kubelet = FakeKubelet(short_tmp / "late.sock")
    client = PodResourcesClient(kubelet.socket_path)
    dialled: list[bool] = []
    dial = threading.Thread(target=lambda: dialled.append(client.wait_ready(20)))
    dial.start()
    try:
        # A second channel: the first attempt found no socket and was retried.
        eventually(lambda: len(opened) >= 2, what="a retried dial")
        kubelet.start()
        started = time.monotonic()
        dial.join(10)
        assert dialled == [True]
        assert time.monotonic() - started < 3
    finally:
        kubelet.stop()
        dial.join(20)
        client.close()


def test_the_dial_leaves_no_thread_behind(kubelet: FakeKubelet) -> None:
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
    kubelet: FakeKubelet, driver_root: Path
) -> None:
    kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[0]])])
    r = Rig(kubelet, driver_root, interval=0.005)
    r.start()
    eventually(lambda: kubelet.list_calls() > 1, what="more than one List")
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
    eventually(rig.shows({}), what="idle")
    assert process_names(rig.overrides) == {}
    rig.kubelet.set_pods(
        [
            gpu_pod("ml", "a", [A100_UUIDS[1]], container="app"),
            gpu_pod("ml", "b", [A100_UUIDS[1], A100_UUIDS[4]]),
        ]
    )
    eventually(rig.shows({1: FULL, 4: HALF}), what="devices 1 and 4 busy")
    eventually(
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
    polls = rig.watcher.polls
    eventually(lambda: rig.watcher.polls >= polls + 10, what="10 more polls")
    assert rig.metric("allocwatch_writes_total") == writes  # nothing changed, nothing written
    rig.overrides.unlink()
    eventually(
        lambda: rig.overrides.exists() and "1" in process_names(rig.overrides), what="restored"
    )
    rig.kubelet.set_pods([gpu_pod("ml", "b", [A100_UUIDS[4]])])
    eventually(lambda: process_names(rig.overrides) == {"4": ["ml/b/main"]}, what="a gone")
    rig.kubelet.set_pods([])
    eventually(rig.shows({}), what="idle again")
    eventually(lambda: process_names(rig.overrides) == {}, what="no processes key left")


def test_opted_out_the_watcher_never_touches_processes(
    kubelet: FakeKubelet, driver_root: Path
) -> None:
    r = Rig(kubelet, driver_root)
    r.watcher.processes = False
    r.overrides.write_text("devices: {'2': {processes: [{pid: 7, name: mine}]}}\n")
    kubelet.set_pods([gpu_pod("ml", "a", [A100_UUIDS[0]])])
    try:
        r.start()
        eventually(r.shows({0: HALF}), what="published")
        assert process_names(r.overrides) == {"2": ["mine"]}
    finally:
        r.close()
    assert r.watcher.remove_readings(timeout=1)
    assert parse_document(r.overrides.read_text()) == {
        "version": 1,
        "devices": {"2": {"processes": [{"pid": 7, "name": "mine"}]}},
    }


def test_remove_readings_on_exit_removes_our_processes(rig: Rig) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    eventually(
        lambda: rig.overrides.exists() and process_names(rig.overrides) == {"0": ["ns/a/main"]}
    )
    rig.close()
    assert rig.watcher.remove_readings(timeout=1)
    assert parse_document(rig.overrides.read_text()) == {"version": 1}
