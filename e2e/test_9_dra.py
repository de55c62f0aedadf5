"""9. DRA: GPUs allocated through ResourceClaims move the readings too.

The fake DRA plugin (`e2e/fakedra`) registers `gpu.nvidia.com` with the real
kubelet and publishes the profile's GPUs in a ResourceSlice; the scheduler
allocates claims from it and the kubelet lists them in pod-resources'
`dynamic_resources`, which the watcher counts (default `--dra-driver`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from allocwatch.outcome import PollOutcome
from e2e.framework import timings
from e2e.framework.dra import DraPlugin, api_server_of
from e2e.framework.expected import Expectation
from e2e.framework.providers import Provider
from e2e.framework.stack import WATCHER_LABELS, GpuPods, Stack
from e2e.framework.waiting import wait_until

OK_POLLS = f'allocwatch_polls_total{{result="{PollOutcome.OK}"}}'


@pytest.fixture(scope="module")
def dra(stack: Stack, expect: Expectation, provider: Provider) -> Iterator[DraPlugin]:
    # The local harness runs no kube-proxy: its pods reach the API server
    # only on the host network, at the kubeconfig's address.
    api_server = api_server_of(stack.kubectl) if provider.name == "local" else None
    plugin = DraPlugin(stack, api_server)
    with timings.phase("deploy DRA plugin"):
        plugin.deploy(len(expect.uuids))
    yield plugin
    with timings.phase("remove DRA plugin"):
        plugin.remove()


@pytest.fixture
def dra_pods(dra: DraPlugin, deployed: Stack, request: pytest.FixtureRequest) -> Iterator[DraPods]:
    # "dra-": gpu_pods names its pods after the test too
    test = request.node.name.split("[")[0].replace("_", "-").lower()[:36].strip("-")
    pods = DraPods(dra, f"dra-{test}")
    yield pods
    deployed.delete_gpu_pods(*pods.created)
    dra.delete_claims()


class DraPods:
    """Names and creates a test's DRA pods; the fixture deletes them and their claims."""

    def __init__(self, dra: DraPlugin, base: str) -> None:
        self.dra = dra
        self.base = base
        self.created: list[str] = []

    def name(self) -> str:
        return f"{self.base}-{len(self.created)}"

    def with_template(self) -> str:
        """A pod whose claim is made from a ResourceClaimTemplate (its own, generated)."""
        pod = self.name()
        self.dra.create_claim(f"{pod}-gpu", template=True)
        self.dra.create_pod(pod, claim_template=f"{pod}-gpu")
        self.created.append(pod)
        return pod

    def with_claim(self, claim: str) -> str:
        pod = self.name()
        self.dra.create_pod(pod, claim=claim)
        self.created.append(pod)
        return pod


def test_a_template_claim_raises_its_gpu_and_deleting_the_pod_brings_it_back(
    deployed: Stack, expect: Expectation, dra: DraPlugin, dra_pods: DraPods
) -> None:
    pod = dra_pods.with_template()
    [index] = dra.allocated_indices(pod)
    deployed.wait_readings(expect.readings({index: 1}), 10, f"GPU {index} to read the DRA claim")
    deployed.delete_gpu_pods(pod)
    deployed.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")


def test_one_claim_shared_by_two_pods_reads_two_claims_clamped(
    deployed: Stack, expect: Expectation, dra: DraPlugin, dra_pods: DraPods
) -> None:
    index = 1 if len(expect.uuids) > 1 else 0
    dra.create_claim("shared-gpu", uuid=expect.uuids[index])
    first, second = dra_pods.with_claim("shared-gpu"), dra_pods.with_claim("shared-gpu")
    assert dra.allocated_indices(first) == dra.allocated_indices(second) == [index]

    expected = expect.readings({index: 2})
    if expect.fraction > 0.5:
        assert expected[str(index)]["used_bytes"] == expect.aperture(index)  # clamped
    deployed.wait_readings(expected, 10, f"GPU {index} to read two claims of one ResourceClaim")
    deployed.delete_gpu_pods(second)
    deployed.wait_readings(expect.readings({index: 1}), 10, f"GPU {index} to read one claim")
    deployed.delete_gpu_pods(first)
    deployed.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")


def test_a_device_plugin_pod_and_a_dra_pod_on_one_gpu_add_up(
    deployed: Stack, expect: Expectation, dra: DraPlugin, dra_pods: DraPods, gpu_pods: GpuPods
) -> None:
    plugin_pod = gpu_pods(gpus=1)
    [uuid] = deployed.visible_devices(plugin_pod)
    index = expect.index_of(uuid)
    deployed.wait_readings(expect.readings({index: 1}), 10, f"GPU {index}: the device-plugin pod")
    dra.create_claim("same-gpu", uuid=uuid)
    dra_pod = dra_pods.with_claim("same-gpu")
    assert dra.allocated_indices(dra_pod) == [index]
    deployed.wait_readings(expect.readings({index: 2}), 10, f"GPU {index}: both pods")
    deployed.delete_gpu_pods(plugin_pod)
    deployed.wait_readings(expect.readings({index: 1}), 10, f"GPU {index}: the DRA pod alone")
    deployed.delete_gpu_pods(dra_pod)
    deployed.wait_readings(expect.idle(), 10, f"GPU {index} to return to idle")


def test_after_a_kubelet_restart_the_slice_is_back_and_readings_recover(
    deployed: Stack, expect: Expectation, dra: DraPlugin, dra_pods: DraPods, provider: Provider
) -> None:
    reason = provider.kubelet_restart_unsupported()
    if reason:
        pytest.skip(reason)
    before = dra_pods.with_template()
    indices = dra.allocated_indices(before)
    deployed.wait_readings(expect.readings(dict.fromkeys(indices, 1)), 10, "the DRA claim")
    watcher = deployed.watcher_pod()
    registrations = dra.registrations()

    restarted = time.monotonic()
    provider.restart_kubelet(deployed.node)
    timings.note("kubelet restart (provider)", time.monotonic() - restarted)
    wait_until(
        lambda: dra.registrations() > registrations,
        90,
        "the DRA plugin to register again",
        interval=1,
        diagnostics=dra.diagnostics,
    )
    # The kubelet deletes the node's slices when it starts; the plugin
    # publishes them again after registering.
    dra.wait_slice(len(expect.uuids), 90)
    timings.note("ResourceSlice back after the restart began", time.monotonic() - restarted)
    wait_until(
        lambda: deployed.ready_pod(WATCHER_LABELS),
        90,
        "a Ready watcher after the restart",
        interval=1,
        diagnostics=dra.diagnostics,
    )
    ok_polls = deployed.watcher_metric(watcher, OK_POLLS)
    wait_until(
        lambda: deployed.watcher_metric(watcher, OK_POLLS) > ok_polls,
        30,
        "a successful poll after the restart",
        diagnostics=dra.diagnostics,
    )
    deployed.wait_readings(
        expect.readings(dict.fromkeys(indices, 1)), 10, "the pre-restart DRA claim to read"
    )

    after = dra_pods.with_template()
    claims = dict.fromkeys(indices, 1)
    for index in dra.allocated_indices(after):
        claims[index] = claims.get(index, 0) + 1
    deployed.wait_readings(expect.readings(claims), 10, "a post-restart DRA claim")
    deployed.delete_gpu_pods(before, after)
    deployed.wait_readings(expect.idle(), 10, "the node to return to idle")
