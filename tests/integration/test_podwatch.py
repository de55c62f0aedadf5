"""The pod watch against a fake API server over real HTTP: list, watch, and its faults.

The server (tests/support/podapi.py) hangs, resets connections and expires
watches on demand. Through all of it the snapshot is served at once, the
staleness is reported, a relist recovers, and stop() ends the thread.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from allocwatch.declaredload import GPU_MEMORY, GPU_UTILIZATION, RUNAI_UTILIZATION, DeclaredLoad
from allocwatch.kubeclient import ConfigError
from allocwatch.podwatch import LoadSource, PodWatch
from devtools.waiting import wait_until
from tests.support.podapi import PodApi, pod_api
from tests.support.podwatching import DEADLINE, records, served_at_once

pytestmark = pytest.mark.timing

GI = 2**30


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[PodApi, Path]]:
    with pod_api(tmp_path) as served:
        yield served


@pytest.fixture
def watches() -> Iterator[list[PodWatch]]:
    started: list[PodWatch] = []
    yield started
    for watch in started:
        watch.stop(DEADLINE)


def start(watches: list[PodWatch], kubeconfig: Path, **kwargs: Any) -> PodWatch:
    # Short server-side watches (and so a short read timeout) keep the fault tests brief.
    kwargs = {"watch_seconds": 1, "timeout": 1.0, "max_backoff": 1.0, **kwargs}
    watch = PodWatch("node-a", kubeconfig=kubeconfig, **kwargs)
    watches.append(watch)
    watch.start()
    return watch


def test_it_lists_the_nodes_pods_then_follows_the_watch(
    api: tuple[PodApi, Path], watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    server.put("ns", "train", {GPU_MEMORY: "75Gi", GPU_UTILIZATION: "95"})
    server.put("ns", "infer", {GPU_MEMORY: "0.5", RUNAI_UTILIZATION: "20-35"})
    server.put("ns", "plain", {"example.com/x": "y"})
    server.put("ns", "elsewhere", {GPU_MEMORY: "1Gi"}, node="node-b")
    watch = start(watches, kubeconfig)
    source: LoadSource = watch  # what the poll loop depends on
    expected = {
        ("ns", "train"): DeclaredLoad(memory_bytes=75 * GI, utilization=(95, 95)),
        ("ns", "infer"): DeclaredLoad(memory_fraction=0.5, utilization=(20, 35)),
    }
    wait_until(lambda: source.loads() == expected, DEADLINE, "the listed pods")
    assert source.health().current, "who sees the list sees it current"
    assert source.health().stale_since is None and source.health().error is None
    assert records(caplog, "watching the pods of node node-a, 3 of them now")
    wait_until(lambda: server.watches() >= 1, DEADLINE, "the watch request")
    first_list, first_watch = server.requests[0], server.requests[1]
    assert first_list["fieldSelector"] == ["spec.nodeName=node-a"]
    assert "watch" not in first_list
    assert first_watch["watch"] == ["true"]
    assert first_watch["fieldSelector"] == ["spec.nodeName=node-a"]
    assert first_watch["resourceVersion"] == ["5"], "the watch starts where the list was taken"

    server.put("ns", "train", {GPU_MEMORY: "30Gi", GPU_UTILIZATION: "40"})
    wait_until(
        lambda: watch.loads()[("ns", "train")] == DeclaredLoad(30 * GI, None, (40, 40)),
        DEADLINE,
        "an edited annotation",
    )
    server.put("ns", "new", {GPU_UTILIZATION: "0"})
    wait_until(lambda: ("ns", "new") in watch.loads(), DEADLINE, "a new pod")
    assert watch.loads()[("ns", "new")] == DeclaredLoad(utilization=(0, 0))
    server.delete("ns", "infer")
    wait_until(lambda: ("ns", "infer") not in watch.loads(), DEADLINE, "a deleted pod")
    server.put("ns", "new", {"example.com/x": "z"})
    wait_until(lambda: ("ns", "new") not in watch.loads(), DEADLINE, "a pod whose annotations went")
    assert set(watch.loads()) == {("ns", "train")}
    assert server.lists() == 1, "a healthy watch never relists"


def test_loads_is_the_same_object_until_a_load_changes(
    api: tuple[PodApi, Path], watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    server.put("ns", "a", {GPU_MEMORY: "1Gi"})
    watch = start(watches, kubeconfig)
    wait_until(lambda: ("ns", "a") in watch.loads(), DEADLINE, "the listed pod")
    before = watch.loads()
    assert watch.loads() is before
    server.put("ns", "a", {GPU_MEMORY: "1Gi", "example.com/x": "y"})
    server.put("ns", "plain", {"example.com/x": "y"})
    # events are applied in order: once this one's line is logged, the two above are applied
    server.put("ns", "marker", {GPU_MEMORY: "marker"})
    wait_until(lambda: records(caplog, "ns/marker"), DEADLINE, "the marker's problem")
    assert watch.loads() is before


def test_a_bad_value_is_logged_once_per_pod_and_value_and_counted(
    api: tuple[PodApi, Path], watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    rejected: list[str] = []
    server.put("ns", "a", {GPU_MEMORY: "lots", GPU_UTILIZATION: "60"})
    watch = start(watches, kubeconfig, on_rejected=rejected.append)
    wait_until(lambda: ("ns", "a") in watch.loads(), DEADLINE, "the listed pod")
    assert watch.loads()[("ns", "a")] == DeclaredLoad(utilization=(60, 60)), "memory: the default"
    # the snapshot is published before the problems are logged and counted
    wait_until(lambda: rejected, DEADLINE, "the count")
    assert records(caplog, "pod ns/a") == [
        "pod ns/a: allocwatch.dev/gpu-memory='lots': expected a quantity such as 20Gi or 512Mi, "
        "or a fraction such as 0.75; it gets the default"
    ]
    assert rejected == [GPU_MEMORY]
    # the same value again (another annotation changed) is not logged again
    server.put("ns", "a", {GPU_MEMORY: "lots", GPU_UTILIZATION: "70"})
    wait_until(lambda: watch.loads()[("ns", "a")].utilization == (70, 70), DEADLINE, "the edit")
    server.put("ns", "a", {GPU_MEMORY: "-5Gi", GPU_UTILIZATION: "70"})
    wait_until(lambda: len(records(caplog, "pod ns/a")) == 2, DEADLINE, "the changed value's line")
    assert "'-5Gi': must not be negative" in records(caplog, "pod ns/a")[1]
    # a 1 MB value: one line, showing the start of it only
    server.put("ns", "b", {GPU_UTILIZATION: "9" * 1_000_000})
    [line] = wait_until(lambda: records(caplog, "pod ns/b"), DEADLINE, "the long value's line")
    assert "is 1000000 characters long" in line and len(line) < 300
    # a relist does not repeat them
    server.put("ns", "c", {GPU_MEMORY: "1Gi"}, notify=False)
    server.compact()
    wait_until(lambda: ("ns", "c") in watch.loads(), DEADLINE, "the relist")
    wait_until(lambda: len(rejected) == 3, DEADLINE, "the long value counted")
    assert len(records(caplog, "pod ns/")) == 3
    assert rejected == [GPU_MEMORY, GPU_MEMORY, GPU_UTILIZATION]


def test_a_hung_server_leaves_the_snapshot_served_and_says_it_is_stale(
    api: tuple[PodApi, Path], watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    server.put("ns", "a", {GPU_MEMORY: "1Gi"})
    watch = start(watches, kubeconfig)
    wait_until(lambda: ("ns", "a") in watch.loads(), DEADLINE, "the listed pod")
    before = watch.loads()

    server.hang()
    server.put("ns", "a", {GPU_MEMORY: "2Gi"})
    server.put("ns", "b", {GPU_MEMORY: "3Gi"})
    # the open watch is silent; its read timeout ends it, and the relist waits unanswered
    wait_until(lambda: server.waiting > 0, DEADLINE, "a request held by the hung server")
    loads, health = served_at_once(watch)
    assert loads is before, "the last annotations seen are kept"
    health = wait_until(lambda: not watch.health().current and watch.health(), DEADLINE, "stale")
    assert health.stale_since is not None and health.stale_since <= time.monotonic()
    assert "Timeout" in (health.error or "")
    assert served_at_once(watch)[0] is before
    assert len(records(caplog, "pod annotations are stale")) == 1

    server.heal()
    wait_until(lambda: watch.health().current, DEADLINE, "current again")
    wait_until(lambda: len(watch.loads()) == 2, DEADLINE, "the relist")
    assert watch.loads() == {
        ("ns", "a"): DeclaredLoad(memory_bytes=2 * GI),
        ("ns", "b"): DeclaredLoad(memory_bytes=3 * GI),
    }
    assert watch.health().stale_since is None and watch.health().error is None
    assert len(records(caplog, "pod annotations are current again")) == 1


def test_reset_connections_leave_the_snapshot_and_a_relist_recovers(
    api: tuple[PodApi, Path], watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    server.put("ns", "a", {GPU_MEMORY: "1Gi"})
    server.put("ns", "b", {GPU_MEMORY: "2Gi"})
    watch = start(watches, kubeconfig)
    wait_until(lambda: len(watch.loads()) == 2, DEADLINE, "the listed pods")
    before = watch.loads()

    server.reset()
    server.delete("ns", "b")
    wait_until(lambda: not watch.health().current, DEADLINE, "stale after a reset")
    lists = server.lists()
    wait_until(lambda: server.lists() > lists + 1, DEADLINE, "relists retried, and reset too")
    assert served_at_once(watch)[0] is before

    server.heal()
    wait_until(
        lambda: set(watch.loads()) == {("ns", "a")}, DEADLINE, "the relist, without the deleted pod"
    )
    assert watch.health().current
    assert len(records(caplog, "pod annotations are stale")) == 1


@pytest.mark.parametrize("as_status", [False, True], ids=["error-event", "http-410"])
def test_an_expired_watch_relists_and_the_snapshot_stays_current(
    api: tuple[PodApi, Path],
    watches: list[PodWatch],
    caplog: pytest.LogCaptureFixture,
    as_status: bool,
) -> None:
    """Compaction forgot the events: only the relist can show these changes."""
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    server.put("ns", "a", {GPU_MEMORY: "1Gi"})
    server.put("ns", "b", {GPU_MEMORY: "2Gi"})
    watch = start(watches, kubeconfig)
    wait_until(lambda: len(watch.loads()) == 2, DEADLINE, "the listed pods")
    server.put("ns", "a", {GPU_MEMORY: "4Gi"}, notify=False)
    server.delete("ns", "b", notify=False)
    server.put("ns", "c", {GPU_UTILIZATION: "50"}, notify=False)
    server.compact(as_status=as_status)
    expected = {
        ("ns", "a"): DeclaredLoad(memory_bytes=4 * GI),
        ("ns", "c"): DeclaredLoad(utilization=(50, 50)),
    }
    wait_until(lambda: watch.loads() == expected, DEADLINE, "the relist")
    assert server.lists() == 2
    assert watch.health().current
    assert records(caplog, "stale") == [], "an expired watch is not an outage"


def test_stop_ends_the_thread_while_the_server_hangs(
    api: tuple[PodApi, Path], watches: list[PodWatch]
) -> None:
    server, kubeconfig = api
    server.put("ns", "a", {GPU_MEMORY: "1Gi"})
    # Timeouts far longer than the deadline below: only cancelling ends the thread in time.
    watch = start(watches, kubeconfig, watch_seconds=300, timeout=120.0)
    wait_until(lambda: ("ns", "a") in watch.loads(), DEADLINE, "the listed pod")
    server.hang()
    wait_until(lambda: server.watches() >= 1, DEADLINE, "the open watch")
    began = time.monotonic()
    watch.stop(DEADLINE)
    assert watch._thread is not None and not watch._thread.is_alive()
    assert time.monotonic() - began < 120, "stop() waited for a timeout, not a cancel"
    assert watch.loads() == {("ns", "a"): DeclaredLoad(memory_bytes=GI)}, "still served"


def test_stop_ends_the_thread_during_a_hung_first_list(
    api: tuple[PodApi, Path], watches: list[PodWatch]
) -> None:
    server, kubeconfig = api
    server.hang()
    watch = start(watches, kubeconfig, watch_seconds=300, timeout=120.0)
    wait_until(lambda: server.waiting > 0, DEADLINE, "the list, held")
    assert served_at_once(watch) == ({}, watch.health())
    assert watch.health().error == "not listed yet"
    watch.stop(DEADLINE)
    assert watch._thread is not None and not watch._thread.is_alive()


def test_stop_before_and_after_start_and_twice(
    api: tuple[PodApi, Path], watches: list[PodWatch]
) -> None:
    _, kubeconfig = api
    PodWatch("node-a", kubeconfig=kubeconfig).stop()
    watch = start(watches, kubeconfig)
    watch.stop(DEADLINE)
    watch.stop(DEADLINE)
    assert watch._thread is not None and not watch._thread.is_alive()


def test_an_unreachable_server_is_stale_from_the_start(
    tmp_path: Path, watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    with pod_api(tmp_path) as (_, kubeconfig):
        pass  # the server is gone, its port closed
    watch = start(watches, kubeconfig)
    health = wait_until(
        lambda: watch.health().error != "not listed yet" and watch.health(), DEADLINE, ""
    )
    assert not health.current and "Connect" in (health.error or "")
    assert watch.loads() == {}
    wait_until(lambda: records(caplog, "pod annotations are stale"), DEADLINE, "one warning")


def test_at_most_max_pods_are_kept_with_one_warning(
    api: tuple[PodApi, Path], watches: list[PodWatch], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    server, kubeconfig = api
    for i in range(5):
        server.put("ns", f"p{i}", {GPU_MEMORY: f"{i + 1}Gi"})
    watch = start(watches, kubeconfig, max_pods=3)
    wait_until(lambda: len(watch.loads()) == 3, DEADLINE, "three pods")
    kept = set(watch.loads())
    server.put("ns", "p9", {GPU_MEMORY: "9Gi"})
    # a pod kept still changes; once its line is logged, p9's event was applied
    marker = sorted(kept)[0]
    server.put(*marker, {GPU_MEMORY: "marker"})
    wait_until(
        lambda: records(caplog, f"{marker[0]}/{marker[1]}:"), DEADLINE, "the marker's problem"
    )
    assert set(watch.loads()) == kept - {marker}
    [warning] = records(caplog, "more than 3 pods declare a load")
    assert "get the defaults" in warning


def test_configuration_errors_raise_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere\.yaml"):
        PodWatch("n", kubeconfig=tmp_path / "nowhere.yaml").start()
    with pytest.raises(ConfigError, match="in-cluster configuration"):
        PodWatch("n", service_account=tmp_path / "no-account").start()
    account = tmp_path / "account"
    account.mkdir()
    (account / "token").write_text("t")
    (account / "namespace").write_text("ns")
    env = pytest.MonkeyPatch()
    with env.context() as patched:
        patched.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST is not set"):
            PodWatch("n", service_account=account).start()


def test_the_client_library_is_imported_only_when_watching() -> None:
    """Off, the option costs nothing: importing the modules loads neither the
    client library nor grpc (the kubelet's), whatever imports them."""
    code = (
        "import sys, allocwatch.podwatch, allocwatch.kubeclient; "
        "loaded = [m for m in ('lightkube', 'httpx2', 'anyio', 'grpc') if m in sys.modules]; "
        "print(loaded); sys.exit(bool(loaded))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
