"""The watch loop against an in-process stub Lister: each poll driven by the test."""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocwatch import publisher, watch
from allocwatch.activity import Band
from allocwatch.declaredload import DeclaredLoad
from allocwatch.document import count_nodes, parse_document
from allocwatch.goyaml import MAX_NODES
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.processes import MAX_PROCESSES_PER_DEVICE
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher
from allocwatch.render import render_document
from allocwatch.shutdown import Interrupted, Shutdown
from allocwatch.watch import Watcher
from devtools.waiting import wait_until
from tests.conftest import A100, A100_APERTURE, A100_HALF, A100_UUIDS
from tests.support.rig import FULL, HALF, IDLE, expected, memory
from tests.support.stublister import StubLister, StubLoads, dra_claim, gpu_claim

OK, LIST_ERROR = PollOutcome.OK, PollOutcome.LIST_ERROR
PUBLISH_ERROR, NO_PROFILE = PollOutcome.PUBLISH_ERROR, PollOutcome.NO_PROFILE


class Loop:
    """A Watcher on a stub Lister, a driver root's profile and its override file."""

    def __init__(
        self,
        driver_root: Path,
        interval: float = 0.5,
        processes: bool = True,
        activity: bool = True,
        declared: StubLoads | None = None,
    ) -> None:
        self.lister = StubLister()
        self.profile = driver_root / "config" / "config.yaml"
        self.overrides = driver_root / "config" / "overrides.yaml"
        self.metrics = Metrics()
        self.watcher = Watcher(
            self.lister,
            ProfileSource(self.profile),
            OverridesPublisher(self.overrides, lock_timeout=1),
            fraction=0.5,
            interval=interval,
            metrics=self.metrics,
            processes=processes,
            activity=activity,
            declared=declared,
        )

    def poll(self) -> PollOutcome:
        return self.watcher.poll()

    def shows(self, busy: dict[int, dict[str, int]]) -> bool:
        return self.overrides.exists() and memory(self.overrides) == expected(busy)

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)

    def polls(self) -> float:
        return sum(self.metric("allocwatch_polls_total", result=o) or 0 for o in PollOutcome)

    def document(self) -> dict:
        return parse_document(self.overrides.read_text())

    def start(self, stop: Shutdown) -> threading.Thread:
        """run() in a thread until `stop`, as the CLI runs it: a stop that lands
        in a parse ends the loop with Interrupted, which is how it stops."""

        def run() -> None:
            with contextlib.suppress(Interrupted):
                self.watcher.run(stop)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


@pytest.fixture
def loop(driver_root: Path) -> Loop:
    return Loop(driver_root)


@pytest.fixture
def running(driver_root: Path) -> Iterator[tuple[Loop, Shutdown]]:
    """A loop whose run() goes on in a thread until the test ends."""
    loop = Loop(driver_root, interval=0.005)
    stop = Shutdown()
    thread = loop.start(stop)
    yield loop, stop
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


@pytest.mark.timing
def test_run_publishes_before_its_first_tick(driver_root: Path) -> None:
    loop = Loop(driver_root, interval=3600)
    loop.lister.set_claims([gpu_claim("ml", "trainer", A100_UUIDS[0])])
    stop = Shutdown()
    thread = loop.start(stop)
    try:
        # The count goes up after the poll has published: wait for it, then
        # the claim must be in the file already, from the first poll.
        wait_until(lambda: loop.polls() >= 1, timeout=5, what="the immediate poll")
        assert loop.shows({0: HALF})
        assert loop.polls() == 1
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_claims_appear_and_disappear(loop: Loop) -> None:
    assert loop.poll() == OK and loop.shows({})
    loop.lister.set_claims([gpu_claim("ml", "a", A100_UUIDS[1])])
    assert loop.poll() == OK and loop.shows({1: HALF})
    loop.lister.set_claims(
        [gpu_claim("ml", "a", A100_UUIDS[1]), gpu_claim("ml", "b", A100_UUIDS[1])]
    )
    assert loop.poll() == OK and loop.shows({1: FULL})
    loop.lister.set_claims([])
    assert loop.poll() == OK and loop.shows({})
    assert loop.metric("allocwatch_device_claims", index="1", uuid=A100_UUIDS[1]) == 0


def test_claims_gauge_moves_when_the_reading_is_clamped(loop: Loop) -> None:
    # A third claim on a full device leaves its reading as it is; the claims
    # gauge must still count it.
    claims = [gpu_claim("ml", name, A100_UUIDS[2]) for name in ("a", "b", "c")]
    loop.lister.set_claims(claims[:2])
    loop.poll()
    assert loop.shows({2: FULL})
    assert loop.metric("allocwatch_device_claims", index="2", uuid=A100_UUIDS[2]) == 2
    loop.lister.set_claims(claims)
    loop.poll()
    assert loop.metric("allocwatch_device_claims", index="2", uuid=A100_UUIDS[2]) == 3
    assert memory(loop.overrides) == expected({2: FULL})


def test_time_sliced_and_renamed_resources(loop: Loop) -> None:
    loop.lister.set_claims(
        [
            gpu_claim("ns", "a", A100_UUIDS[3] + "::0"),
            gpu_claim("ns", "b", A100_UUIDS[3] + "::1", resource="nvidia.com/gpu.shared"),
        ]
    )
    loop.poll()
    assert loop.shows({3: FULL})


def test_unknown_ids_are_counted_and_logged_once_per_change(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    loop.lister.set_claims([gpu_claim("ns", "a", "GPU-not-in-profile"), gpu_claim("ns", "a", "0")])
    for _ in range(5):
        assert loop.poll() == OK
    assert loop.metric("allocwatch_unknown_device_ids") == 2
    assert memory(loop.overrides) == expected({})
    assert caplog.text.count("ids matching no profile device: 0, GPU-not-in-profile") == 1
    loop.lister.set_claims([])
    loop.poll()
    assert loop.metric("allocwatch_unknown_device_ids") == 0
    assert "matches a profile device again" in caplog.text


def test_idle_node_makes_zero_writes(loop: Loop) -> None:
    loop.poll()
    st = loop.overrides.stat()
    for _ in range(25):
        assert loop.poll() == OK
    assert loop.overrides.stat().st_ino == st.st_ino  # never replaced
    assert loop.overrides.stat().st_mtime_ns == st.st_mtime_ns
    assert loop.metric("allocwatch_writes_total") == 1


def test_deleted_file_restored_next_poll(loop: Loop) -> None:
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[2])])
    loop.poll()
    loop.overrides.unlink()
    loop.poll()
    assert loop.shows({2: HALF})


def test_list_errors_keep_the_previous_reading(loop: Loop) -> None:
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[0])])
    loop.poll()
    loop.lister.fail("UNAVAILABLE")
    loop.lister.set_claims([])
    for _ in range(3):
        assert loop.poll() == LIST_ERROR
    assert loop.metric("allocwatch_polls_total", result=LIST_ERROR) == 3
    assert memory(loop.overrides) == expected({0: HALF})
    loop.lister.fail(None)
    assert loop.poll() == OK and loop.shows({})


def test_a_failing_list_is_logged_once_not_every_poll(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    assert loop.poll() == OK
    loop.lister.fail("list pod resources at k.sock: UNAVAILABLE: down")
    for _ in range(3):
        assert loop.poll() == LIST_ERROR
    assert caplog.text.count("UNAVAILABLE") == 1, caplog.text
    loop.lister.fail(None)
    assert loop.poll() == OK
    assert caplog.text.count("recovered: publishing again") == 1


def test_a_lister_always_failing_publishes_nothing(loop: Loop) -> None:
    loop.lister.fail("INTERNAL")
    for _ in range(3):
        assert loop.poll() == LIST_ERROR
    assert not loop.overrides.exists()


def test_profile_missing_then_appearing(tmp_path: Path) -> None:
    driver = tmp_path / "driver"
    loop = Loop(driver)
    assert loop.poll() == NO_PROFILE
    assert not driver.exists()  # nothing created
    ready, why = loop.watcher.ready()
    assert not ready and "missing" in why
    loop.profile.parent.mkdir(parents=True)
    shutil.copy(A100, loop.profile)
    assert loop.poll() == OK
    assert memory(loop.overrides) == expected({})
    assert loop.watcher.ready() == (True, "ok")


@pytest.mark.timing
def test_a_failed_poll_is_retried_within_a_second_at_a_long_interval(tmp_path: Path) -> None:
    loop = Loop(tmp_path / "driver", interval=3600)
    stop = Shutdown()
    thread = loop.start(stop)
    try:
        wait_until(lambda: loop.polls() >= 1, what="the first poll")
        loop.profile.parent.mkdir(parents=True)
        shutil.copy(A100, loop.profile)
        wait_until(loop.overrides.exists, timeout=5, what="a publish long before the hour")
        assert memory(loop.overrides) == expected({})
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_malformed_profile_keeps_last_good_devices(loop: Loop) -> None:
    assert loop.poll() == OK
    loop.profile.write_text("version: [broken")
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[4])])
    assert loop.poll() == OK
    assert memory(loop.overrides) == expected({4: HALF})


def test_profile_change_is_picked_up(loop: Loop, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="allocwatch")
    loop.poll()
    text = A100.read_text().replace("12345678000", "abcdef00000")
    loop.profile.write_text(
        text.replace(
            'driver_version: "550.163.01"', 'driver_version: "550.163.01"\n  num_devices: 2'
        )
    )
    loop.lister.set_claims([gpu_claim("ns", "a", "GPU-12345678-1234-1234-1234-abcdef000001")])
    assert loop.poll() == OK
    assert memory(loop.overrides) == {"0": IDLE, "1": HALF}  # devices 2..7 removed
    # The log says what changed, not that someone edited the file.
    for index in range(2, 8):
        assert f"device {index}: reading removed" in caplog.text
    assert "rewrote" not in caplog.text


def test_device_metrics_follow_a_uuid_change(loop: Loop) -> None:
    loop.poll()
    assert loop.metric("allocwatch_device_used_bytes", index="0", uuid=A100_UUIDS[0]) == 0
    # Same devices, same (idle) readings, new uuids: the old series must go.
    loop.profile.write_text(A100.read_text().replace("12345678000", "abcdef00000"))
    assert loop.poll() == OK
    new_uuid = A100_UUIDS[0].replace("12345678000", "abcdef00000")
    assert loop.metric("allocwatch_device_used_bytes", index="0", uuid=A100_UUIDS[0]) is None
    assert loop.metric("allocwatch_device_used_bytes", index="0", uuid=new_uuid) == 0


def without_memory_on_3() -> str:
    """The a100 profile with no memory for device 3, and none in device_defaults."""
    profile = A100.read_text().replace(
        "  memory:\n    total_bytes", "  memory_off:\n    total_bytes"
    )
    memory_block = "\n    memory: {total_bytes: 42949672960, reserved_bytes: 611319808}"
    for i in (0, 1, 2, 4, 5, 6, 7):
        uuid_line = f'    uuid: "{A100_UUIDS[i]}"'
        profile = profile.replace(uuid_line, uuid_line + memory_block)
    return profile


def test_a_device_without_memory_gets_claims_but_no_reading(loop: Loop) -> None:
    loop.profile.write_text(without_memory_on_3())
    loop.lister.set_claims(
        [gpu_claim("ns", "a", A100_UUIDS[3]), gpu_claim("ns", "b", A100_UUIDS[1])]
    )
    assert loop.poll() == OK
    want = {str(i): IDLE for i in (0, 2, 4, 5, 6, 7)} | {"1": HALF}
    assert memory(loop.overrides) == want  # nothing for device 3: its base values stand
    assert loop.metric("allocwatch_unknown_device_ids") == 0
    assert loop.metric("allocwatch_device_claims", index="3", uuid=A100_UUIDS[3]) == 1
    assert loop.metric("allocwatch_device_used_bytes", index="3", uuid=A100_UUIDS[3]) is None
    # Back to the profile with memory for all: device 3 is published too.
    shutil.copy(A100, loop.profile)
    assert loop.poll() == OK
    assert memory(loop.overrides) == expected({1: HALF, 3: HALF})
    assert loop.metric("allocwatch_device_used_bytes", index="3", uuid=A100_UUIDS[3]) == A100_HALF


def test_a_device_without_memory_splits_its_claims_by_source(loop: Loop) -> None:
    loop.profile.write_text(without_memory_on_3())
    loop.lister.set_claims(
        [gpu_claim("ns", "a", A100_UUIDS[3]), dra_claim("ns", "b", "c", "gpu-3")]
    )
    assert loop.poll() == OK
    assert loop.metric("allocwatch_device_claims", index="3", uuid=A100_UUIDS[3]) == 2
    for source in ("dra", "device_plugin"):
        labels = {"index": "3", "uuid": A100_UUIDS[3], "source": source}
        assert loop.metric("allocwatch_device_claims_by_source", **labels) == 1
    assert loop.metric("allocwatch_device_used_bytes", index="3", uuid=A100_UUIDS[3]) is None


def test_device_metrics_go_with_the_profile(loop: Loop) -> None:
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[2])])
    assert loop.poll() == OK
    used = loop.metric("allocwatch_device_used_bytes", index="2", uuid=A100_UUIDS[2])
    assert used == HALF["used_bytes"]
    loop.profile.unlink()
    assert loop.poll() == NO_PROFILE
    assert loop.metric("allocwatch_device_used_bytes", index="2", uuid=A100_UUIDS[2]) is None
    shutil.copy(A100, loop.profile)
    assert loop.poll() == OK
    used = loop.metric("allocwatch_device_used_bytes", index="2", uuid=A100_UUIDS[2])
    assert used == HALF["used_bytes"]


def test_unreadable_paths_fail_the_poll_not_the_watcher(
    loop: Loop, driver_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loop.overrides.mkdir()  # a directory where the file should be
    assert loop.poll() == PUBLISH_ERROR
    assert f"load {loop.overrides}: Is a directory" in caplog.text
    loop.overrides.rmdir()
    assert loop.poll() == OK
    blocker = driver_root / "file"
    blocker.write_text("")
    loop.watcher.profile = ProfileSource(blocker / "config.yaml")  # under a regular file
    assert loop.poll() == NO_PROFILE
    assert f"profile {blocker / 'config.yaml'}: Not a directory" in caplog.text


def test_refused_document_is_retried_not_overwritten(loop: Loop) -> None:
    loop.overrides.write_text("owner: someone\n")
    for _ in range(2):
        assert loop.poll() == PUBLISH_ERROR
    assert loop.overrides.read_text() == "owner: someone\n"
    loop.overrides.write_text("all: {performance_state: P8}\n")
    assert loop.poll() == OK and loop.shows({})
    assert loop.document()["all"] == {"performance_state": "P8"}


def test_500_random_changes_end_each_in_exactly_their_state(loop: Loop) -> None:
    rng = random.Random(20261202)
    claims: list = []
    for step in range(500):
        if claims and rng.random() < 0.45:
            claims.pop(rng.randrange(len(claims)))
        else:
            ids = rng.sample(A100_UUIDS, rng.choice([1, 1, 2]))
            if rng.random() < 0.2:
                ids = [f"{ids[0]}::{rng.randrange(4)}"]
            claims += [gpu_claim("ns", f"p{step}", device) for device in ids]
        loop.lister.set_claims(claims)
        assert loop.poll() == OK
        counts = [0] * 8
        for claim in claims:
            counts[A100_UUIDS.index(claim.device_id.split("::")[0])] += 1
        used = {i: min(n * A100_HALF, A100_APERTURE) for i, n in enumerate(counts)}
        want = {i: {"used_bytes": u, "free_bytes": A100_APERTURE - u} for i, u in used.items()}
        assert memory(loop.overrides) == {str(i): v for i, v in want.items()}, step
        gauges = {
            i: loop.metric("allocwatch_device_used_bytes", index=str(i), uuid=A100_UUIDS[i])
            for i in range(8)
        }
        assert gauges == used, step


def test_remove_readings_on_exit_leaves_no_memory_keys(loop: Loop) -> None:
    loop.overrides.write_text("devices: {'0': {thermal: {t: 1}}}\n")
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[0])])
    loop.poll()
    assert loop.shows({0: HALF})
    assert loop.watcher.remove_readings(timeout=1)
    assert loop.document() == {"version": 1, "devices": {"0": {"thermal": {"t": 1}}}}


def test_a_deleted_profile_makes_the_watcher_unready_at_once(loop: Loop) -> None:
    assert loop.poll() == OK
    assert loop.watcher.ready()[0]
    loop.profile.unlink()
    assert loop.poll() == NO_PROFILE
    ready, why = loop.watcher.ready()
    assert not ready and "missing" in why


def test_ready_tracks_recent_success(driver_root: Path) -> None:
    now = [100.0]
    loop = Loop(driver_root, interval=1.0)
    loop.watcher.clock = lambda: now[0]
    assert not loop.watcher.ready()[0]
    assert loop.poll() == OK
    assert loop.watcher.ready()[0]
    now[0] += 2.9
    assert loop.watcher.ready()[0]
    now[0] += 0.2
    ready, why = loop.watcher.ready()
    assert not ready and "last successful poll" in why


def test_byte_counts_are_written_as_integers(loop: Loop) -> None:
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[0])])
    loop.poll()
    text = loop.overrides.read_text()
    assert f"used_bytes: {A100_HALF}\n" in text and "e+" not in text and ".0" not in text


@pytest.mark.timing
def test_a_fast_interval_polls_repeatedly_and_stops_cleanly(
    running: tuple[Loop, Shutdown],
) -> None:
    loop, _ = running
    loop.lister.set_claims([gpu_claim("ml", "a", A100_UUIDS[0])])
    calls = loop.lister.calls
    wait_until(lambda: loop.lister.calls > calls + 1, what="more than one List")
    wait_until(lambda: loop.shows({0: HALF}), what="the claim published")


def process_names(loop: Loop) -> dict[str, list[str]]:
    return {
        k: [p["name"] for p in v["processes"]]
        for k, v in loop.document().get("devices", {}).items()
        if "processes" in v
    }


def test_claims_are_published_as_processes_and_go_with_them(loop: Loop) -> None:
    loop.poll()
    assert process_names(loop) == {}
    loop.lister.set_claims(
        [
            gpu_claim("ml", "a", A100_UUIDS[1], container="app"),
            gpu_claim("ml", "b", A100_UUIDS[1]),
            gpu_claim("ml", "b", A100_UUIDS[4]),
        ]
    )
    loop.poll()
    assert loop.shows({1: FULL, 4: HALF})
    assert process_names(loop) == {"1": ["ml/a/app", "ml/b/main"], "4": ["ml/b/main"]}
    devices = loop.document()["devices"]
    assert len({p["pid"] for p in devices["1"]["processes"]}) == 2
    writes = loop.metric("allocwatch_writes_total")
    for _ in range(10):
        loop.poll()
    assert loop.metric("allocwatch_writes_total") == writes  # nothing changed, nothing written
    loop.overrides.unlink()
    loop.poll()
    assert "1" in process_names(loop)  # restored
    loop.lister.set_claims([gpu_claim("ml", "b", A100_UUIDS[4])])
    loop.poll()
    assert process_names(loop) == {"4": ["ml/b/main"]}
    loop.lister.set_claims([])
    loop.poll()
    assert loop.shows({}) and process_names(loop) == {}


def test_opted_out_the_watcher_never_touches_processes(driver_root: Path) -> None:
    loop = Loop(driver_root, processes=False)
    loop.overrides.write_text("devices: {'2': {processes: [{pid: 7, name: mine}]}}\n")
    loop.lister.set_claims([gpu_claim("ml", "a", A100_UUIDS[0])])
    loop.poll()
    assert loop.shows({0: HALF})
    assert process_names(loop) == {"2": ["mine"]}
    assert loop.watcher.remove_readings(timeout=1)
    assert loop.document() == {
        "version": 1,
        "devices": {"2": {"processes": [{"pid": 7, "name": "mine"}]}},
    }


def test_remove_readings_on_exit_removes_our_processes(loop: Loop) -> None:
    loop.lister.set_claims([gpu_claim("ns", "a", A100_UUIDS[0])])
    loop.poll()
    assert process_names(loop) == {"0": ["ns/a/main"]}
    assert loop.watcher.remove_readings(timeout=1)
    assert loop.document() == {"version": 1}


# ---- DRA claims ----------------------------------------------------------------


def by_source(loop: Loop, index: int, source: str) -> float | None:
    labels = {"index": str(index), "uuid": A100_UUIDS[index], "source": source}
    return loop.metric("allocwatch_device_claims_by_source", **labels)


def test_a_dra_claim_moves_its_gpu_and_leaves(loop: Loop) -> None:
    loop.poll()
    loop.lister.set_claims([dra_claim("ml", "a", "a-gpus-x7k2p", "gpu-4")])
    loop.poll()
    assert loop.shows({4: HALF})
    assert by_source(loop, 4, "dra") == 1 and by_source(loop, 4, "device_plugin") == 0
    assert loop.metric("allocwatch_device_claims", index="4", uuid=A100_UUIDS[4]) == 1
    loop.lister.set_claims([])
    loop.poll()
    assert loop.shows({}) and by_source(loop, 4, "dra") == 0


def test_a_claim_shared_by_two_pods_reads_two_claims_clamped(loop: Loop) -> None:
    shared = [dra_claim("ml", pod, "shared", "gpu-1") for pod in ("a", "b")]
    loop.lister.set_claims(shared[:1])
    loop.poll()
    assert loop.shows({1: HALF})
    loop.lister.set_claims(shared)
    loop.poll()
    assert loop.shows({1: FULL}) and by_source(loop, 1, "dra") == 2


def test_device_plugin_and_dra_claims_on_one_gpu_add_up(loop: Loop) -> None:
    loop.lister.set_claims(
        [gpu_claim("ml", "a", A100_UUIDS[6]), dra_claim("ml", "b", "c", "gpu-6")]
    )
    loop.poll()
    assert loop.shows({6: FULL})
    assert by_source(loop, 6, "dra") == 1 and by_source(loop, 6, "device_plugin") == 1
    assert loop.metric("allocwatch_device_claims", index="6", uuid=A100_UUIDS[6]) == 2


def test_mig_devices_count_on_their_parent(loop: Loop) -> None:
    loop.lister.set_claims(
        [
            dra_claim("ml", "a", "c", "gpu-5-mig-1g.5gb-19-0"),
            dra_claim("ml", "a", "c", "gpu-5-mig-1g.5gb-19-1"),
        ]
    )
    loop.poll()
    assert loop.shows({5: FULL})


def test_a_profile_with_minor_numbers_is_matched_by_minor(loop: Loop) -> None:
    # Minor numbers in reverse index order: gpu-0 is index 7.
    text = loop.profile.read_text()
    for index in range(8):
        needle = f"index: {index}\n"
        assert text.count(needle) == 1, needle
        text = text.replace(needle, f"index: {index}\n    minor_number: {7 - index}\n")
    loop.profile.write_text(text)
    loop.lister.set_claims([dra_claim("ml", "a", "c", "gpu-0")])
    loop.poll()
    assert loop.shows({7: HALF})


def test_unknown_dra_names_are_counted_and_logged_once_per_change(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    loop.lister.set_claims([dra_claim("ml", "a", "c", "gpu-vfio-0")])
    for _ in range(5):
        loop.poll()
    assert loop.metric("allocwatch_unknown_device_ids") == 1
    assert caplog.text.count("ids matching no profile device: gpu.nvidia.com/gpu-vfio-0") == 1
    assert memory(loop.overrides) == expected({})


# ---- scale ------------------------------------------------------------------------


def test_5000_claims_write_a_document_allocwatch_reads_back_after_a_restart(
    loop: Loop, driver_root: Path
) -> None:
    """Past 2,212 claims the process entries alone once outgrew the node bound."""
    claims = [gpu_claim("ml", f"p{n}", f"{A100_UUIDS[n % 8]}::{n}") for n in range(5000)]
    loop.lister.set_claims(claims)
    assert loop.poll() == OK
    doc = loop.document()  # allocwatch's own reader takes it
    assert count_nodes(doc) <= MAX_NODES
    for index in range(8):
        entries = doc["devices"][str(index)]["processes"]
        assert len(entries) == MAX_PROCESSES_PER_DEVICE
        assert entries[-1]["name"] == f"+{625 - MAX_PROCESSES_PER_DEVICE + 1} more claims"
    assert loop.metric("allocwatch_folded_processes") == 8 * (625 - MAX_PROCESSES_PER_DEVICE + 1)
    restarted = Loop(driver_root)
    restarted.lister.set_claims(claims)
    assert restarted.poll() == OK
    assert restarted.document() == doc  # same pids, nothing to write
    assert restarted.metric("allocwatch_writes_total") == 0
    restarted.lister.set_claims([])
    assert restarted.poll() == OK and restarted.shows({})
    assert restarted.watcher.remove_readings(timeout=1)


def test_an_unchanged_list_and_profile_are_not_reconciled_again(
    loop: Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims = tuple(gpu_claim("ml", f"p{n}", A100_UUIDS[n % 8]) for n in range(2000))
    loop.lister.set_claims(list(claims))
    calls: list[int] = []
    real_read = watch.read
    monkeypatch.setattr(watch, "read", lambda *a: calls.append(1) or real_read(*a))
    keys: list[int] = []
    real_publication = watch.publication
    monkeypatch.setattr(watch, "publication", lambda *a: keys.append(1) or real_publication(*a))
    checks: list[int] = []
    real_holds = publisher.holds
    monkeypatch.setattr(publisher, "holds", lambda *a: checks.append(1) or real_holds(*a))
    for _ in range(5):
        assert loop.poll() == OK
    assert (len(calls), len(keys)) == (1, 1)
    assert len(checks) <= 2  # before the first write, and after it; not every poll
    loop.lister.set_claims(list(claims[:-1]))
    assert loop.poll() == OK
    assert (len(calls), len(keys)) == (2, 2)


# ---- activity ------------------------------------------------------------------------


def dynamic(loop: Loop, index: int) -> dict:
    return loop.document()["devices"][str(index)].get("dynamic_metrics", {})


def test_activity_follows_the_claims_and_returns_to_idle(loop: Loop) -> None:
    assert loop.poll() == OK
    assert dynamic(loop, 2) == {
        "utilization": {
            "pattern": "idle",
            "gpu_min": 0,
            "gpu_max": 1,
            "memory_min": 0,
            "memory_max": 1,
        },
        "power": None,
        "temperature": None,
    }
    loop.lister.set_claims([gpu_claim("ml", "a", A100_UUIDS[2])])
    assert loop.poll() == OK
    busy = dynamic(loop, 2)
    assert busy["utilization"]["gpu_min"] == 70 and busy["utilization"]["gpu_max"] == 90
    assert busy["power"] == {"base_mw": 334400, "variance_mw": 32800}
    assert busy["temperature"] == {"base_c": 73, "ramp_c": 0, "variance_c": 5}
    assert dynamic(loop, 1)["power"] is None  # the others idle
    (entry,) = loop.document()["devices"]["2"]["processes"]
    assert (entry["sm_util"], entry["mem_util"]) == (80, 45)
    writes = loop.metric("allocwatch_writes_total")
    for _ in range(5):
        loop.poll()
    assert loop.metric("allocwatch_writes_total") == writes  # the engine varies it, not us
    loop.lister.set_claims(
        [gpu_claim("ml", "a", A100_UUIDS[2] + "::0"), gpu_claim("ml", "b", A100_UUIDS[2] + "::1")]
    )
    loop.poll()
    assert dynamic(loop, 2)["utilization"]["gpu_min"] == 91  # time-sliced: busier
    loop.lister.set_claims([])
    loop.poll()
    assert (
        dynamic(loop, 2)["power"] is None and dynamic(loop, 2)["utilization"]["pattern"] == "idle"
    )
    assert loop.watcher.remove_readings(timeout=1)
    assert loop.document() == {"version": 1}


def test_with_no_activity_nothing_of_it_is_ever_written(driver_root: Path) -> None:
    loop = Loop(driver_root, activity=False)
    loop.overrides.write_text("devices: {'2': {dynamic_metrics: {utilization: {gpu_min: 5}}}}\n")
    loop.lister.set_claims([gpu_claim("ml", "a", A100_UUIDS[2])])
    assert loop.poll() == OK
    assert dynamic(loop, 2) == {"utilization": {"gpu_min": 5}}
    assert all(
        "dynamic_metrics" not in b for i, b in loop.document()["devices"].items() if i != "2"
    )
    assert "sm_util" not in loop.document()["devices"]["2"]["processes"][0]
    assert loop.watcher.remove_readings(timeout=1)
    assert loop.document()["devices"] == {"2": {"dynamic_metrics": {"utilization": {"gpu_min": 5}}}}


def test_a_pin_holds_through_claims_and_the_surface_comes_back_after_reset(loop: Loop) -> None:
    loop.lister.set_claims([gpu_claim("ml", "a", A100_UUIDS[3])])
    loop.poll()
    doc = loop.document()
    bucket = doc["devices"]["3"]
    bucket["thermal"] = {"temperature_gpu_c": 50}  # nvml-mock-ctl temp --gpu 3 50
    bucket["dynamic_metrics"]["temperature"] = {"base_c": 50, "ramp_c": 0, "variance_c": 0}
    doc["all"] = {"utilization": {"gpu": 5, "memory": 5}, "dynamic_metrics": {"utilization": None}}
    loop.overrides.write_text(render_document(doc))  # and nvml-mock-ctl util --gpu all 5
    for claims in (
        [],
        [gpu_claim("ml", "b", A100_UUIDS[3])],
        [gpu_claim("ml", "c", A100_UUIDS[4])],
    ):
        loop.lister.set_claims(claims)
        assert loop.poll() == OK
        got = loop.document()
        assert got["devices"]["3"]["dynamic_metrics"]["temperature"]["base_c"] == 50
        assert all("utilization" not in dynamic(loop, i) for i in range(8))  # all's shows
    del got["all"], got["devices"]["3"]  # nvml-mock-ctl reset --gpu all... then --gpu 3
    loop.overrides.write_text(render_document(got))
    assert loop.poll() == OK
    assert dynamic(loop, 4)["temperature"]["base_c"] == 73 and dynamic(loop, 4)["utilization"]
    assert dynamic(loop, 3)["temperature"] is None


def test_a_profile_without_power_leaves_it_alone_and_says_so_once(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    text = loop.profile.read_text()
    start, end = text.index("  power:"), text.index("  thermal:")
    loop.profile.write_text(text[:start] + text[end:])
    loop.overrides.write_text("devices: {'1': {dynamic_metrics: {power: {base_mw: 5}}}}\n")
    for claims in ([], [gpu_claim("ml", "a", A100_UUIDS[1])], []):
        loop.lister.set_claims(claims)
        assert loop.poll() == OK
        assert dynamic(loop, 1)["power"] == {"base_mw": 5}
    assert caplog.text.count("device 1 power: left alone (the profile has no power block)") == 1


# ---- declared loads -----------------------------------------------------------------


def test_declared_loads_move_memory_processes_and_activity(driver_root: Path) -> None:
    loads = StubLoads()
    loop = Loop(driver_root, declared=loads)
    shared = A100_UUIDS[5]
    loop.lister.set_claims(
        [
            gpu_claim("ml", "infer", shared + "::0"),
            gpu_claim("ml", "train", shared + "::1"),
            gpu_claim("ml", "plain", A100_UUIDS[6]),
        ]
    )
    loads.declare("ml", "infer", DeclaredLoad(memory_bytes=4 * 2**30, utilization=Band(40, 40)))
    loads.declare("ml", "train", DeclaredLoad(memory_fraction=0.25, utilization=Band(95, 95)))
    assert loop.poll() == OK
    quarter = int(float(A100_APERTURE) * 0.25)
    assert memory(loop.overrides)["5"]["used_bytes"] == 4 * 2**30 + quarter
    assert memory(loop.overrides)["6"] == HALF  # the plain pod: the defaults
    entries = {e["name"]: e for e in loop.document()["devices"]["5"]["processes"]}
    assert entries["ml/infer/main"]["used_memory_mib"] == 4 * 1024
    assert entries["ml/infer/main"]["sm_util"] < entries["ml/train/main"]["sm_util"]
    assert dynamic(loop, 5)["utilization"]["gpu_min"] == 97  # 1 - 0.6 x 0.05
    writes = loop.metric("allocwatch_writes_total")
    loop.poll()
    assert loop.metric("allocwatch_writes_total") == writes
    loads.declare("ml", "infer", DeclaredLoad(utilization=Band(0, 0)))  # an edited annotation
    assert loop.poll() == OK
    assert memory(loop.overrides)["5"]["used_bytes"] == A100_HALF + quarter
    assert dynamic(loop, 5)["utilization"]["gpu_min"] == 95


def test_stale_annotations_keep_the_last_known_and_follow_the_kubelet(driver_root: Path) -> None:
    loads = StubLoads()
    loop = Loop(driver_root, declared=loads)
    loads.declare("ml", "train", DeclaredLoad(memory_fraction=1.0))
    loop.lister.set_claims([gpu_claim("ml", "train", A100_UUIDS[1])])
    assert loop.poll() == OK and loop.shows({1: FULL})
    loads.go_stale("the API server is away")
    assert loop.poll() == OK and loop.shows({1: FULL})  # the last known annotations
    assert loop.metric("allocwatch_declared_load_stale") == 1
    assert loop.watcher.ready()[0]  # still ready: the API server is a hint, not a dependency
    loop.lister.set_claims([])  # the pod is deleted while the API server is away
    assert loop.poll() == OK and loop.shows({})
    loads.go_stale(None)
    loop.poll()
    assert loop.metric("allocwatch_declared_load_stale") == 0
