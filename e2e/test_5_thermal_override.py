"""5. A foreign `thermal` override, written under nvml-mock's lock, survives our publishes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.framework.expected import Expectation
from e2e.framework.stack import GpuPods, Stack

THERMAL = {"temperature_gpu_c": 85}


@pytest.fixture
def thermal_device(deployed: Stack, expect: Expectation) -> Iterator[str]:
    key = str(expect.devices[-1].index)
    deployed.wait_readings(expect.idle(), 10, "an idle node")
    deployed.patch_overrides(
        {"devices": {key: {"thermal": THERMAL}}, "all": {"performance_state": "P8"}}
    )
    yield key
    deployed.patch_overrides({"devices": {key: {"thermal": None}}, "all": None})


def test_thermal_override_survives_publishes(
    deployed: Stack, expect: Expectation, thermal_device: str, gpu_pods: GpuPods
) -> None:
    def assert_foreign_keys_kept() -> None:
        exists, doc = deployed.read_document()
        assert exists
        assert doc["devices"][thermal_device]["thermal"] == THERMAL, doc
        assert doc["all"] == {"performance_state": "P8"}, doc

    pod = gpu_pods(gpus=1)
    claims = expect.claims_for(deployed.visible_devices(pod))
    deployed.wait_readings(expect.readings(claims), 10, "the claim to be published")
    assert_foreign_keys_kept()

    deployed.delete_gpu_pods(pod)
    deployed.wait_readings(expect.idle(), 10, "the node to return to idle")
    assert_foreign_keys_kept()
