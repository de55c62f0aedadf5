"""10. DRA: GPUs allocated through ResourceClaims move the readings too.

The fake DRA plugin (`e2e/fakedra`) registers `gpu.nvidia.com` with the real
kubelet and publishes the profile's GPUs in a ResourceSlice; the scheduler
allocates claims from it and the kubelet lists them in pod-resources'
`dynamic_resources`, which the watcher counts (its default `--dra-driver`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from allocwatch.metrics import PollOutcome
from devtools.waiting import wait_until
from e2e.framework import timings
from e2e.framework.draplugin import FakeDraPlugin
from e2e.framework.draworkloads import DraPods
from e2e.framework.expected import Expectation
from e2e.framework.providers import Provider
from e2e.framework.stack import GpuPods, Stack

OK_POLLS = f'allocwatch_polls_total{{result="{PollOutcome.OK}"}}'


@pytest.fixture(scope="module")
def dra(stack: Stack, expect: Expectation) -> Iterator[FakeDraPlugin]:
    """The plugin, for this module only: the other tests see a node without DRA."""
    with timings.phase("deploy DRA plugin"):
        stack.dra.deploy(len(expect.uuids))
    yield stack.dra
    with timings.phase("remove DRA plugin"):
        stack.dra.remove()


@pytest.fixture
def dra_pods(
    dra: FakeDraPlugin, deployed: Stack, request: pytest.FixtureRequest
) -> Iterator[DraPods]:
    # "dra-": gpu_pods names its pods after the test too
    test = request.node.name.split("[")[0].replace("_", "-").lower()[:36].strip("-")
    pods = DraPods(deployed.dra_workloads, f"dra-{test}")
    yield pods
    deployed.workloads.delete(*pods.pods)
    deployed.dra_workloads.delete_claims(*pods.claims)
    deployed.dra_workloads.delete_claims(*pods.templates, templates=True)


def test_a_template_claim_raises_its_gpu_and_deleting_the_pod_brings_it_back(
    deployed: Stack, expect: Expectation, dra_pods: DraPods
) -> None:
    pod = dra_pods.with_template()
    [index] = deployed.dra_workloads.allocated_indices(pod)
    deployed.watcher.wait_readings(
        expect.readings({index: 1}), 10, f"GPU {index} to read the DRA claim"
    )
    deployed.workloads.delete(pod)
    deployed.watcher.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")


def test_one_claim_shared_by_two_pods_reads_two_claims_clamped(
    deployed: Stack, expect: Expectation, dra_pods: DraPods
) -> None:
    index = 1 if len(expect.uuids) > 1 else 0
    claim = dra_pods.claim("shared-gpu", expect.uuids[index])
    first, second = dra_pods.with_claim(claim), dra_pods.with_claim(claim)
    allocated = deployed.dra_workloads.allocated_indices
    assert allocated(first) == allocated(second) == [index]

    expected = expect.readings({index: 2})
    if expect.fraction > 0.5:
        assert expected[str(index)]["used_bytes"] == expect.aperture(index)  # clamped
    deployed.watcher.wait_readings(expected, 10, f"GPU {index} to read two pods' claim")
    deployed.workloads.delete(second)
    deployed.watcher.wait_readings(
        expect.readings({index: 1}), 10, f"GPU {index} to read one claim"
    )
    deployed.workloads.delete(first)
    deployed.watcher.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")


def test_a_device_plugin_pod_and_a_dra_pod_on_one_gpu_add_up(
    deployed: Stack, expect: Expectation, dra_pods: DraPods, gpu_pods: GpuPods
) -> None:
    plugin_pod = gpu_pods(gpus=1)
    [uuid] = deployed.workloads.visible_devices(plugin_pod)
    index = expect.index_of(uuid)
    deployed.watcher.wait_readings(
        expect.readings({index: 1}), 10, f"GPU {index}: the device-plugin pod"
    )
    dra_pod = dra_pods.with_claim(dra_pods.claim("same-gpu", uuid))
    assert deployed.dra_workloads.allocated_indices(dra_pod) == [index]
    deployed.watcher.wait_readings(expect.readings({index: 2}), 10, f"GPU {index}: both pods")
    deployed.workloads.delete(plugin_pod)
    deployed.watcher.wait_readings(
        expect.readings({index: 1}), 10, f"GPU {index}: the DRA pod alone"
    )
    deployed.workloads.delete(dra_pod)
    deployed.watcher.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")


def test_after_a_kubelet_restart_the_slice_is_back_and_readings_recover(
    deployed: Stack,
    expect: Expectation,
    dra: FakeDraPlugin,
    dra_pods: DraPods,
    provider: Provider,
) -> None:
    reason = provider.kubelet_restart_unsupported()
    if reason:
        pytest.skip(reason)
    before = dra_pods.with_template()
    claims = dict.fromkeys(deployed.dra_workloads.allocated_indices(before), 1)
    deployed.watcher.wait_readings(expect.readings(claims), 10, "the DRA claim")
    watcher = deployed.watcher.pod()
    registrations = dra.registrations()

    restarted = time.monotonic()
    provider.restart_kubelet(deployed.node)
    timings.note("kubelet restart (provider)", time.monotonic() - restarted)
    wait_until(
        lambda: dra.registrations() > registrations,
        90,
        "the DRA plugin to register again",
        interval=1,
        diagnostics=deployed.diagnostics,
    )
    # The kubelet deletes the node's slices when it starts; the plugin
    # publishes them again after registering.
    dra.wait_slice(len(expect.uuids), 90)
    timings.note("ResourceSlice back after the restart began", time.monotonic() - restarted)
    # The file may still hold the pre-restart reading (a failed List keeps
    # it), so only a successful poll counted from now on shows a reconnect.
    ok_polls = deployed.watcher.metric(watcher, OK_POLLS)
    wait_until(
        lambda: deployed.watcher.metric(watcher, OK_POLLS) > ok_polls,
        30,
        "a successful poll after the restart",
        diagnostics=deployed.diagnostics,
    )
    deployed.watcher.wait_readings(expect.readings(claims), 10, "the pre-restart DRA claim")

    after = dra_pods.with_template()
    for index in deployed.dra_workloads.allocated_indices(after):
        claims[index] = claims.get(index, 0) + 1
    deployed.watcher.wait_readings(expect.readings(claims), 10, "a post-restart DRA claim")
    assert deployed.watcher.pod() == watcher, "the watcher pod was replaced"
    deployed.workloads.delete(before, after)
    deployed.watcher.wait_readings(expect.idle(), 10, "the node to return to idle")
