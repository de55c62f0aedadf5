"""7. Restarting the watcher keeps the readings correct; `helm uninstall` leaves no memory keys."""

from __future__ import annotations

from devtools.waiting import wait_until
from e2e.framework.expected import Expectation, memory_readings, merged, temperature_pin
from e2e.framework.stack import GpuPods, Stack


def test_watcher_restart_keeps_readings_correct(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    pod = gpu_pods(gpus=1)
    expected = expect.readings(expect.claims_for(deployed.workloads.visible_devices(pod)))
    deployed.watcher.wait_readings(expected, 10, "the claim to be published")

    old = deployed.watcher.pod()
    deployed.kubectl.delete("pod", old, "-n", deployed.ns)
    new = wait_until(
        lambda: (p := deployed.watcher.ready_pod()) != old and p,
        120,
        "a new Ready watcher pod",
        diagnostics=deployed.diagnostics,
    )
    assert new != old
    deployed.watcher.wait_readings(expected, 10, "the new watcher to publish the claim")


def test_helm_uninstall_leaves_no_memory_keys(deployed: Stack, expect: Expectation) -> None:
    deployed.watcher.wait_readings(expect.idle(), 10, "an idle node")
    # Another writer's keys, next to ours in every device's bucket, a temperature
    # pin among them: the cleanup must take exactly our keys (the pinned
    # temperature is the pin's) and leave the rest, file and lock included.
    foreign = {
        "all": {"performance_state": "P8"},
        "devices": {str(d.index): temperature_pin(70) for d in expect.devices},
    }
    with deployed.files.foreign_keys_restored(expect.idle()) as found:
        deployed.files.patch_overrides(foreign)
        deployed.watcher.uninstall()  # returns once the watcher pods are gone
        exists, doc = deployed.files.read()
        assert exists
        assert doc == {"version": 1, **merged(found, foreign)}, doc
        left = memory_readings(doc) or {}
        assert not [i for i in expect.idle() if i in left]  # memory_readings: our keys only
        assert deployed.files.lock_file_exists()
