"""2. A pod requesting one GPU moves exactly that GPU, and deleting it brings it back."""

from __future__ import annotations

from e2e.framework.expected import Expectation
from e2e.framework.stack import GpuPods, Stack

WITHIN = 10.0


def test_one_gpu_pod_moves_its_gpu_and_only_it(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    deployed.watcher.wait_readings(expect.idle(), WITHIN, "an idle node")
    pod = gpu_pods(gpus=1)
    uuids = deployed.workloads.visible_devices(pod)
    assert len(uuids) == 1 and uuids[0] in expect.uuids, uuids
    index = expect.index_of(uuids[0])

    readings = deployed.watcher.wait_readings(
        expect.readings({index: 1}), WITHIN, f"GPU {index} to rise within {WITHIN:g}s"
    )
    assert readings[str(index)]["used_bytes"] == expect.per_claim(index) > 0
    assert all(
        m == {"used_bytes": 0, "free_bytes": expect.aperture(int(i))}
        for i, m in readings.items()
        if i != str(index)
    )

    deployed.workloads.delete(pod)
    deployed.watcher.wait_readings(expect.idle(), WITHIN, f"GPU {index} to return to idle")
