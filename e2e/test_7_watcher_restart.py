"""7. Restarting the watcher keeps the readings correct; `helm uninstall` leaves no memory keys."""

from __future__ import annotations

from e2e.framework.expected import Expectation, memory_readings
from e2e.framework.stack import WATCHER_LABELS, GpuPods, Stack
from e2e.framework.waiting import wait_until


def test_watcher_restart_keeps_readings_correct(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    pod = gpu_pods(gpus=1)
    expected = expect.readings(expect.claims_for(deployed.visible_devices(pod)))
    deployed.wait_readings(expected, 10, "the claim to be published")

    old = deployed.watcher_pod()
    deployed.kubectl.delete("pod", old, "-n", deployed.ns)
    new = wait_until(
        lambda: (p := deployed.ready_pod(WATCHER_LABELS)) != old and p,
        120,
        "a new Ready watcher pod",
        diagnostics=deployed.diagnostics,
    )
    assert new != old
    deployed.wait_readings(expected, 10, "the new watcher to publish the claim")


def test_helm_uninstall_leaves_no_memory_keys(deployed: Stack, expect: Expectation) -> None:
    deployed.wait_readings(expect.idle(), 10, "an idle node")
    deployed.uninstall_chart()
    wait_until(
        lambda: not deployed.pods(WATCHER_LABELS),
        60,
        "the watcher pods to be gone",
        diagnostics=deployed.diagnostics,
    )
    _, doc = deployed.read_document(through_helper=True)
    assert not memory_readings(doc), doc
