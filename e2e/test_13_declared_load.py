"""13. Pods declare their load in annotations, through the real API server.

Two annotated pods share one time-sliced GPU and a plain pod has another: the
document must read what each declared (memory and utilization) and the
defaults for the plain one, by the suite's own arithmetic; an annotation edited
on a running pod moves the reading.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.framework.expected import Expectation, activity_blocks
from e2e.framework.stack import DEFAULT_PLUGIN_ARGS, GpuPods, Stack

WITHIN = 20.0
GPU_MEMORY = "allocwatch.dev/gpu-memory"
GPU_UTILIZATION = "allocwatch.dev/gpu-utilization"
GIB = 2**30


@pytest.fixture
def shared_uuid(deployed: Stack, expect: Expectation) -> Iterator[str]:
    """The largest GPU advertised three times (`::0`..`::2`), every other one unhealthy:
    the only allocatable ids, so every pod lands on it."""
    shared = max(expect.uuids, key=lambda u: expect.aperture(expect.index_of(u)))
    deployed.plugin.only(expect.uuids, shared, replicas=3)
    yield shared
    n = len(expect.uuids)
    deployed.plugin.deploy(DEFAULT_PLUGIN_ARGS, allocatable=n, capacity=n)


def test_pods_read_what_they_declare_and_an_edit_moves_the_reading(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods, shared_uuid: str
) -> None:
    deployed.watcher.wait_readings(expect.idle(), WITHIN, "an idle node")
    infer = gpu_pods(gpus=1, annotations={GPU_MEMORY: "2Gi", GPU_UTILIZATION: "40"})
    train = gpu_pods(gpus=1, annotations={GPU_MEMORY: "0.2", GPU_UTILIZATION: "95"})
    plain = gpu_pods(gpus=1)
    for pod in (infer, train, plain):
        assert deployed.workloads.visible_devices(pod) == [shared_uuid]

    index = expect.index_of(shared_uuid)
    room = expect.aperture(index)

    def reading(infer_bytes: int) -> dict[str, dict[str, int]]:
        used = min(infer_bytes + int(float(room) * 0.2) + expect.per_claim(index), room)
        return {**expect.idle(), str(index): {"used_bytes": used, "free_bytes": room - used}}

    deployed.watcher.wait_readings(
        reading(2 * GIB), WITHIN, "the GPU at what its pods declared, the plain one's default"
    )
    # 40 %, 95 % and the default 70-90 % as independent loads
    util = activity_blocks(deployed.watcher.read_document()[1])[str(index)]["utilization"]
    assert (util["gpu_min"], util["gpu_max"]) == (
        round(100 * (1 - 0.6 * 0.05 * 0.3)),
        round(100 * (1 - 0.6 * 0.05 * 0.1)),
    )
    deployed.workloads.annotate(infer, GPU_MEMORY, "6Gi")
    deployed.watcher.wait_readings(reading(6 * GIB), WITHIN, "the edited annotation")
