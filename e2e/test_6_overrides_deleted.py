"""6. Deleting overrides.yaml (what an nvml-mock restart does) is repaired within one interval."""

from __future__ import annotations

from allocwatch.durations import format_duration
from e2e.framework import timings
from e2e.framework.expected import Expectation, memory_readings
from e2e.framework.stack import GpuPods, Stack

# Measured on the node from the unlink to the file's return, so only the
# watcher's own poll work (List, compare, write) comes on top of the interval.
SLACK = 0.35
# Deletions land at different points of the watcher's tick; each must be repaired.
ROUNDS = 4


def test_deleted_overrides_are_restored_within_one_interval(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    pod = gpu_pods(gpus=1)
    expected = expect.readings(expect.claims_for(deployed.workloads.visible_devices(pod)))
    deployed.watcher.wait_readings(expected, 10, "the claim to be published")

    interval = deployed.settings.interval_seconds
    log = deployed.kubectl.logs(deployed.ns, deployed.watcher.pod())
    assert f" every {deployed.settings.interval} " in log, log  # the chart passed it on
    delays = []
    for _ in range(ROUNDS):
        restored_after, doc = deployed.files.remove_overrides_and_time_restore(timeout=10)
        assert restored_after is not None, (
            "overrides.yaml was not restored within 10 s\n" + deployed.diagnostics()
        )
        assert memory_readings(doc) == expected
        delays.append(restored_after)
    for delay in delays:
        timings.note(
            f"overrides.yaml back after deletion (interval {format_duration(interval)})", delay
        )
    assert max(delays) <= interval + SLACK, delays
