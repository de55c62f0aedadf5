"""6. Deleting overrides.yaml (what an nvml-mock restart does) is repaired within one interval."""

from __future__ import annotations

from e2e.framework import timings
from e2e.framework.expected import Expectation, memory_readings
from e2e.framework.stack import GpuPods, Stack

# The next poll restores the file; allow for the poll's own work and exec start-up noise.
SLACK = 0.35


def test_deleted_overrides_are_restored_within_one_interval(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    pod = gpu_pods(gpus=1)
    expected = expect.readings(expect.claims_for(deployed.visible_devices(pod)))
    deployed.wait_readings(expected, 10, "the claim to be published")

    interval = deployed.settings.interval_seconds
    restored_after, doc = deployed.remove_overrides_and_time_restore(timeout=10)
    assert restored_after is not None, "overrides.yaml was not restored within 10 s"
    timings.note(f"overrides.yaml restored after deletion (interval {interval}s)", restored_after)
    assert memory_readings(doc) == expected
    assert restored_after <= interval + SLACK
