"""3. A pod requesting two GPUs moves both."""

from __future__ import annotations

from e2e.framework.expected import Expectation
from e2e.framework.stack import GpuPods, Stack


def test_two_gpu_pod_moves_both(deployed: Stack, expect: Expectation, gpu_pods: GpuPods) -> None:
    pod = gpu_pods(gpus=2)
    uuids = deployed.workloads.visible_devices(pod)
    assert len(set(uuids)) == 2 and set(uuids) <= set(expect.uuids), uuids
    claims = expect.claims_for(uuids)
    assert list(claims.values()) == [1, 1]

    deployed.watcher.wait_readings(expect.readings(claims), 10, f"GPUs {sorted(claims)} to rise")

    deployed.workloads.delete(pod)
    deployed.watcher.wait_readings(expect.idle(), 10, "both GPUs to return to idle")
