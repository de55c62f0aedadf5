"""4. Time-slicing: two pods on replicas of one physical GPU read twice the claim, clamped.

The plugin is redeployed with `--replicas 2` and every GPU but one marked
unhealthy, so the only two allocatable ids are `<uuid>::0` and `<uuid>::1`
of the same physical GPU and both pods must land on it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.framework.expected import Expectation
from e2e.framework.stack import DEFAULT_PLUGIN_ARGS, GpuPods, Stack


@pytest.fixture
def shared_uuid(deployed: Stack, expect: Expectation) -> Iterator[str]:
    shared = expect.uuids[1 if len(expect.uuids) > 1 else 0]
    deployed.plugin.only(expect.uuids, shared, replicas=2)
    yield shared
    n = len(expect.uuids)
    deployed.plugin.deploy(DEFAULT_PLUGIN_ARGS, allocatable=n, capacity=n)


def test_two_pods_on_one_time_sliced_gpu_read_twice_the_claim_clamped(
    deployed: Stack, expect: Expectation, shared_uuid: str, gpu_pods: GpuPods
) -> None:
    first, second = gpu_pods(gpus=1), gpu_pods(gpus=1)
    assert deployed.workloads.visible_devices(first) == [shared_uuid]
    assert deployed.workloads.visible_devices(second) == [shared_uuid]
    index = expect.index_of(shared_uuid)

    expected = expect.readings({index: 2})
    used = min(2 * expect.per_claim(index), expect.aperture(index))
    assert expected[str(index)] == {"used_bytes": used, "free_bytes": expect.aperture(index) - used}
    if expect.fraction > 0.5:
        assert used == expect.aperture(index) < 2 * expect.per_claim(index)  # clamped
    deployed.watcher.wait_readings(expected, 10, f"GPU {index} to read two claims")

    deployed.workloads.delete(second)
    deployed.watcher.wait_readings(
        expect.readings({index: 1}), 10, f"GPU {index} to read one claim"
    )
    deployed.workloads.delete(first)
    deployed.watcher.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")
