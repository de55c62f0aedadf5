"""DRA claims through the pod-resources client, from a fake kubelet in another process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocwatch.podresources import PodResourcesClient
from devtools.podresources import FakePodResourcesLister, dra_pod, dra_resource, gpu_pod
from devtools.waiting import wait_until
from tests.conftest import A100_UUIDS
from tests.support.rig import HALF, Rig

pytestmark = pytest.mark.timing


@pytest.fixture
def rig(kubelet: FakePodResourcesLister, driver_root: Path) -> Iterator[Rig]:
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
    wait_until(rig.shows({}), what="idle")
    rig.kubelet.set_pods([dra_pod("ml", "a", "a-gpus-x7k2p", [dra_resource("gpu-4")])])
    wait_until(rig.shows({4: HALF}), what="device 4 busy")
    wait_until(lambda: by_source(rig, 4, "dra") == 1, what="one DRA claim")
    assert by_source(rig, 4, "device_plugin") == 0
    assert rig.metric("allocwatch_device_claims", index="4", uuid=A100_UUIDS[4]) == 1
    rig.kubelet.set_pods([])
    wait_until(rig.shows({}), what="idle again")
    wait_until(lambda: by_source(rig, 4, "dra") == 0, what="no DRA claim")


def test_a_kubelet_without_dra_names_is_logged_once(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    old = dra_resource("", driver="", pool="", cdi_devices=["k8s.gpu.nvidia.com/claim=u-gpu-0"])
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", [old]), gpu_pod("ml", "b", [A100_UUIDS[0]])])
    rig.start()
    wait_until(rig.shows({0: HALF}), what="the device-plugin claim")
    polls = rig.polls()
    wait_until(lambda: rig.polls() > polls + 3, what="more polls")
    # another pod makes the List differ, so it is decoded again
    rig.kubelet.set_pods([dra_pod("ml", "a", "c", [old]), gpu_pod("ml", "b", [A100_UUIDS[1]])])
    wait_until(rig.shows({1: HALF}), what="the next List")
    assert caplog.text.count("without driver and device names") == 1


def test_a_dra_only_node_needs_no_watched_resource(
    kubelet: FakePodResourcesLister, driver_root: Path
) -> None:
    rig = Rig(kubelet, driver_root)
    rig.client.close()
    rig.client = PodResourcesClient(kubelet.socket_path, resource_names=(), call_timeout=0.5)
    rig.watcher.lister = rig.client
    try:
        kubelet.set_pods([dra_pod("ml", "a", "c", [dra_resource("gpu-2")])])
        rig.start()
        wait_until(rig.shows({2: HALF}), what="a DRA claim with no device plugin watched")
    finally:
        rig.close()
