"""The watch loop with DRA claims, against a fake kubelet in another process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocwatch.outcome import PollOutcome
from allocwatch.podresources import PodResourcesClient
from fakekubelet import FakeKubelet, dra_pod, dra_resource, gpu_pod
from tests.conftest import A100, A100_UUIDS
from tests.test_watch import FULL, HALF, Rig, eventually, expected, memory


@pytest.fixture
def rig(kubelet: FakeKubelet, driver_root: Path) -> Iterator[Rig]:
    r = Rig(kubelet, driver_root)
    yield r
    r.close()


def by_source(rig: Rig, index: int, source: str) -> float | None:
    return rig.metric(
        "allocwatch_device_claims_by_source",
        index=str(index),
        uuid=A100_UUIDS[index],
        source=source,
    )


def test_a_dra_claim_moves_its_gpu_and_leaves(rig: Rig) -> None:
    rig.start()
    eventually(rig.shows({}), what="idle")
    rig.kubelet.set_pods([dra_pod("ml", "a", "a-gpus-x7k2p", [dra_resource("gpu-4")])])
    eventually(rig.shows({4: HALF}), what="device 4 busy")
    eventually(lambda: by_source(rig, 4, "dra") == 1, what="one DRA claim")
    assert by_source(rig, 4, "device_plugin") == 0
    assert rig.metric("allocwatch_device_claims", index="4", uuid=A100_UUIDS[4]) == 1
    rig.kubelet.set_pods([])
    eventually(rig.shows({}), what="idle again")
    eventually(lambda: by_source(rig, 4, "dra") == 0, what="no DRA claim")


def test_a_claim_shared_by_two_pods_reads_two_claims_clamped(rig: Rig) -> None:
    rig.start()
    shared = [dra_pod("ml", pod, "shared", [dra_resource("gpu-1")]) for pod in ("a", "b")]
    rig.kubelet.set_pods(shared[:1])
    eventually(rig.shows({1: HALF}), what="one pod's claim")
    rig.kubelet.set_pods(shared)
    eventually(rig.shows({1: FULL}), what="both pods' claims")
    eventually(lambda: by_source(rig, 1, "dra") == 2, what="two DRA claims")


def test_device_plugin_and_dra_claims_on_one_gpu_add_up(rig: Rig) -> None:
    rig.start()
    rig.kubelet.set_pods(
        [gpu_pod("ml", "a", [A100_UUIDS[6]]), dra_pod("ml", "b", "c", [dra_resource("gpu-6")])]
    )
    eventually(rig.shows({6: FULL}), what="a device-plugin and a DRA claim on device 6")
    eventually(lambda: by_source(rig, 6, "dra") == 1, what="the DRA share")
    assert by_source(rig, 6, "device_plugin") == 1
    assert rig.metric("allocwatch_device_claims", index="6", uuid=A100_UUIDS[6]) == 2


def test_mig_devices_count_on_their_parent(rig: Rig) -> None:
    rig.start()
    migs = [dra_resource("gpu-5-mig-1g.5gb-19-0"), dra_resource("gpu-5-mig-1g.5gb-19-1")]
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", migs)])
    eventually(rig.shows({5: FULL}), what="two MIG devices on GPU 5")


def test_a_profile_with_minor_numbers_is_matched_by_minor(rig: Rig) -> None:
    # Minor numbers in reverse index order: gpu-0 is index 7.
    text = rig.profile.read_text()
    for index in range(8):
        needle = f"index: {index}\n"
        assert text.count(needle) == 1, needle
        text = text.replace(needle, f"index: {index}\n    minor_number: {7 - index}\n")
    rig.profile.write_text(text)
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", [dra_resource("gpu-0")])])
    rig.start()
    eventually(rig.shows({7: HALF}), what="gpu-0 on the device of minor number 0")


def test_unknown_dra_names_are_counted_and_logged_once_per_change(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rig.start()
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", [dra_resource("gpu-vfio-0")])])
    eventually(lambda: rig.metric("allocwatch_unknown_device_ids") == 1, what="one unknown")
    polls = rig.watcher.polls
    eventually(lambda: rig.watcher.polls > polls + 3, what="more quiet polls")
    assert caplog.text.count("ids matching no profile device: gpu.nvidia.com/gpu-vfio-0") == 1
    assert memory(rig.overrides) == expected({})


def test_a_kubelet_without_dra_names_is_logged_once(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    old = dra_resource("", driver="", pool="", cdi_devices=["k8s.gpu.nvidia.com/claim=u-gpu-0"])
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", [old]), gpu_pod("ml", "b", [A100_UUIDS[0]])])
    rig.start()
    eventually(rig.shows({0: HALF}), what="the device-plugin claim")
    polls = rig.watcher.polls
    eventually(lambda: rig.watcher.polls > polls + 3, what="more polls")
    # another pod makes the List differ, so it is decoded again
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", [old]), gpu_pod("ml", "b", [A100_UUIDS[1]])])
    eventually(rig.shows({1: HALF}), what="the next List")
    assert caplog.text.count("without driver and device names") == 1


def test_a_dra_only_node_needs_no_watched_resource(kubelet: FakeKubelet, driver_root: Path) -> None:
    rig = Rig(kubelet, driver_root)
    rig.client.close()
    rig.client = PodResourcesClient(kubelet.socket_path, resource_names=(), call_timeout=0.5)
    rig.watcher.lister = rig.client
    try:
        kubelet.set_pods([dra_pod("ml", "a", "c", [dra_resource("gpu-2")])])
        rig.start()
        eventually(rig.shows({2: HALF}), what="a DRA claim with no device plugin watched")
    finally:
        rig.close()


def test_a_device_without_memory_splits_its_claims_by_source(
    kubelet: FakeKubelet, driver_root: Path
) -> None:
    # Device 3 has no memory block: claim gauges only, no used/free series.
    profile = A100.read_text().replace(
        "  memory:\n    total_bytes", "  memory_off:\n    total_bytes"
    )
    r = Rig(kubelet, driver_root)
    r.profile.write_text(profile)
    try:
        assert r.client.wait_ready(5)
        kubelet.set_pods(
            [gpu_pod("ns", "a", [A100_UUIDS[3]]), dra_pod("ns", "b", "c", [dra_resource("gpu-3")])]
        )
        assert r.watcher.poll().result == PollOutcome.OK
        assert r.metric("allocwatch_device_claims", index="3", uuid=A100_UUIDS[3]) == 2
        assert by_source(r, 3, "dra") == by_source(r, 3, "device_plugin") == 1
        assert r.metric("allocwatch_device_used_bytes", index="3", uuid=A100_UUIDS[3]) is None
    finally:
        r.close()
