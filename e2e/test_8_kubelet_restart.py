"""8. Kubelet restart: the plugin re-registers, the watcher keeps running, readings recover."""

from __future__ import annotations

import time

import pytest

from allocwatch.metrics import PollOutcome
from devtools.waiting import wait_until
from e2e.framework import timings
from e2e.framework.expected import Expectation
from e2e.framework.providers import Provider
from e2e.framework.stack import GpuPods, Stack

OK_POLLS = f'allocwatch_polls_total{{result="{PollOutcome.OK}"}}'


def _watcher_identity(stack: Stack) -> tuple[str, str, int]:
    pod = stack.kubectl.get("pod", stack.watcher.pod(), "-n", stack.ns)
    restarts = sum(c["restartCount"] for c in pod["status"]["containerStatuses"])
    return pod["metadata"]["name"], pod["metadata"]["uid"], restarts


def test_kubelet_restart(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods, provider: Provider
) -> None:
    reason = provider.kubelet_restart_unsupported()
    if reason:
        pytest.skip(reason)
    before = gpu_pods(gpus=1)
    uuids = deployed.workloads.visible_devices(before)
    deployed.watcher.wait_readings(
        expect.readings(expect.claims_for(uuids)), 10, "the claim published"
    )
    watcher = _watcher_identity(deployed)
    registrations = deployed.plugin.registrations()

    restarted = time.monotonic()
    provider.restart_kubelet(deployed.node)
    timings.note("kubelet restart (provider)", time.monotonic() - restarted)

    wait_until(
        lambda: deployed.plugin.registrations() > registrations,
        90,
        "the fake plugin to register again",
        interval=1,
        diagnostics=deployed.diagnostics,
    )
    timings.note(
        "fake plugin registered again after the restart began", time.monotonic() - restarted
    )
    n = len(expect.uuids)
    wait_until(
        lambda: deployed.plugin.allocatable() == n and deployed.watcher.ready_pod(),
        90,
        f"{n} allocatable GPUs and a Ready watcher after the restart",
        interval=1,
        diagnostics=deployed.diagnostics,
    )
    # The file and the pod's Ready status may both still be the ones from
    # before the restart (a failed List keeps the previous reading), so only a
    # successful poll counted from now on shows the watcher reconnected.
    ok_polls = deployed.watcher.metric(watcher[0], OK_POLLS)
    wait_until(
        lambda: deployed.watcher.metric(watcher[0], OK_POLLS) > ok_polls,
        30,
        "a successful poll after the restart",
        diagnostics=deployed.diagnostics,
    )
    deployed.watcher.wait_readings(
        expect.readings(expect.claims_for(uuids)), 10, "the pre-restart claim to read correctly"
    )

    after = gpu_pods(gpus=1)
    uuids += deployed.workloads.visible_devices(after)
    deployed.watcher.wait_readings(
        expect.readings(expect.claims_for(uuids)), 10, "a post-restart claim to be published"
    )
    assert _watcher_identity(deployed) == watcher, "the watcher pod was replaced or restarted"

    deployed.workloads.delete(before, after)
    deployed.watcher.wait_readings(expect.idle(), 10, "the node to return to idle")
