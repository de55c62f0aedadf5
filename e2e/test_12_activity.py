"""12. Utilization, power and temperature follow the GPU pods, and a pin holds through them.

The document's `devices["<i>"].dynamic_metrics` must be exactly the suite's
own arithmetic on the e2e profile (framework/expected.py): busy, drawing and
warm on the claimed GPUs, idle on the others, and idle everywhere again when
the pods go. A temperature pinned the way `nvml-mock-ctl temp` pins it (its
static value and a zero-variance dynamic block) stays on its device through
pods coming and going, and our temperature comes back after the pin is reset.
"""

from __future__ import annotations

from e2e.framework.expected import Expectation, temperature_pin
from e2e.framework.stack import GpuPods, Stack

WITHIN = 10.0
PIN = temperature_pin(61)


def test_activity_follows_the_gpu_pods(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    deployed.watcher.wait_activity(expect.activity(), WITHIN, "every GPU idle")
    first, second = gpu_pods(gpus=1), gpu_pods(gpus=2)
    held = deployed.workloads.visible_devices(first) + deployed.workloads.visible_devices(second)
    deployed.watcher.wait_activity(
        expect.activity(expect.claims_for(held)), WITHIN, "the claimed GPUs busy"
    )
    deployed.workloads.delete(first)
    deployed.workloads.delete(second)
    deployed.watcher.wait_activity(expect.activity(), WITHIN, "every GPU idle again")


def test_a_pinned_temperature_holds_through_pods_and_ours_returns_after(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    deployed.watcher.wait_activity(expect.activity(), WITHIN, "every GPU idle")
    pinned = str(expect.devices[0].index)
    with deployed.files.foreign_keys_restored([str(d.index) for d in expect.devices]):
        deployed.files.patch_overrides({"devices": {pinned: PIN}})
        for gpus in (1, 2, 0):
            pods = [gpu_pods(gpus=1) for _ in range(gpus)]
            held = [u for pod in pods for u in deployed.workloads.visible_devices(pod)]
            want = expect.activity(expect.claims_for(held))
            want[pinned]["temperature"] = PIN["dynamic_metrics"]["temperature"]
            deployed.watcher.wait_activity(want, WITHIN, f"{gpus} pods, the pin held")
            for pod in pods:
                deployed.workloads.delete(pod)
        exists, doc = deployed.files.read()
        assert exists and doc["devices"][pinned]["thermal"] == PIN["thermal"]
        deployed.files.patch_overrides({"devices": {pinned: None}})  # nvml-mock-ctl reset
        deployed.watcher.wait_activity(expect.activity(), WITHIN, "ours back after the reset")
    # the document put back as found, less ours: the watcher's next poll restores them
    deployed.watcher.wait_activity(expect.activity(), WITHIN, "ours back after the restore")
