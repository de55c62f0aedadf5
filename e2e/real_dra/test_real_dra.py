"""allocwatch beside NVIDIA's DRA driver and nvml-mock, read as a user reads it.

Pods claim `gpu.nvidia.com` devices through ResourceClaims; the driver's
ResourceSlice names each GPU `gpu-<minor>` and gives its `uuid`, and no minor
number of the profile is its GPU's index (framework/realdra.py). Every reading
is `nvidia-smi` in the node view, through the mock library nvml-mock's NRI
plugin injects; the expected MiB come from the profile the library loads, by
the suite's own arithmetic (framework/expected.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from devtools.waiting import wait_until
from e2e.framework import timings
from e2e.framework.draworkloads import DraPods
from e2e.framework.providers import Provider
from e2e.framework.realdra import RealDraStack
from e2e.framework.realstack import NODE_VIEW
from e2e.framework.smiactivity import everywhere, wait_reads

# The engine re-reads overrides.yaml at most this often (MOCK_NVML_OVERRIDES_TTL).
ENGINE_TTL = 1.0
# Generous deadlines for the waits; the bounds are asserted on the measured times.
WITHIN = 30.0


def bound(real: RealDraStack) -> float:
    """How soon nvidia-smi must show a change allocwatch publishes."""
    return real.interval + ENGINE_TTL + 1.0


def apps(real: RealDraStack) -> list[list[str]]:
    """The node view's Processes table: [GPU uuid, process name, used MiB], sorted."""
    return sorted(real.smi.apps(real.workload_ns, NODE_VIEW))


def named(real: RealDraStack, holders: dict[str, list[str]]) -> list[list[str]]:
    """The Processes table for `holders` (pod -> the UUIDs its claim holds): each pod
    on each of its GPUs, with that GPU's used MiB shared equally among its claims.
    A DRA claim's process is named for its pod, container and ResourceClaim."""
    claims = Counter(uuid for uuids in holders.values() for uuid in uuids)
    names = {pod: real.claims.claim_name(pod) for pod in holders}
    used = {row.uuid: row.used_mib for row in real.expected(dict(claims))}
    return sorted(
        [uuid, f"{real.workload_ns}/{pod}/main/{names[pod]}", str(used[uuid] // claims[uuid])]
        for pod, uuids in holders.items()
        for uuid in uuids
    )


def test_1_idle_and_no_dra_name_is_an_index(real: RealDraStack) -> None:
    real.wait_rows({}, WITHIN, "an idle node")
    devices = real.driver.devices()
    assert sorted(devices.values()) == sorted(real.expectation.uuids), devices
    # each gpu-<N> is another GPU than index N: a mapping by index would show
    by_index = {f"gpu-{real.expectation.index_of(uuid)}": uuid for uuid in devices.values()}
    assert all(by_index[name] != uuid for name, uuid in devices.items()), devices
    assert apps(real) == []


def test_2_one_claim_moves_its_gpu_busy_names_the_pod_and_returns(
    real: RealDraStack, dra_pods: DraPods
) -> None:
    real.wait_rows({}, WITHIN, "an idle node")
    pod = dra_pods.with_template()
    [uuid] = real.claimed_uuids(pod)
    real.wait_rows({uuid: 1}, WITHIN, "its GPU to rise, the others idle")
    assert apps(real) == named(real, {pod: [uuid]})
    busy = Counter({real.expectation.index_of(uuid): 1})
    wait_reads(real, everywhere(real, busy), "its GPU busy, warm and drawing, the others idle")
    # The pod gets its GPU's /dev/nvidia<minor> from the driver's CDI spec and so
    # sees one GPU; which one is nvml-mock's to say, and it picks the GPU whose
    # index is that minor (hack/realstack/README.md), so only the count is checked.
    assert len(real.smi.rows(real.workload_ns, pod)) == 1

    real.delete_pods([pod])
    took = real.wait_rows({}, WITHIN, "its GPU back to idle")
    timings.note("idle in nvidia-smi after the DRA pod is gone", took)
    assert took <= bound(real), f"idle after {took:.2f}s, bound {bound(real):.2f}s"
    assert apps(real) == []
    wait_reads(real, everywhere(real, Counter()), "every GPU's activity idle again")


def test_3_one_claim_shared_by_two_pods_counts_two(real: RealDraStack, dra_pods: DraPods) -> None:
    claim = dra_pods.claim("shared-gpu")
    first, second = dra_pods.with_claim(claim), dra_pods.with_claim(claim)
    [uuid] = real.claimed_uuids(first)
    assert real.claimed_uuids(second) == [uuid]
    real.wait_rows({uuid: 2}, WITHIN, "two claims' worth on the shared GPU")
    assert apps(real) == named(real, {first: [uuid], second: [uuid]})

    real.delete_pods([second])
    real.wait_rows({uuid: 1}, WITHIN, "one claim's worth once one pod is gone")
    real.delete_pods([first])
    real.wait_rows({}, WITHIN, "every GPU idle")


def test_4_a_claim_for_two_devices_moves_both(real: RealDraStack, dra_pods: DraPods) -> None:
    pod = dra_pods.with_template(gpus=2)
    uuids = real.claimed_uuids(pod)
    assert len(set(uuids)) == 2, uuids
    real.wait_rows(dict.fromkeys(uuids, 1), WITHIN, "both GPUs to rise, the others idle")
    assert apps(real) == named(real, {pod: uuids})
    real.delete_pods([pod])
    real.wait_rows({}, WITHIN, "every GPU idle")


def test_5_kubelet_restart_during_a_held_claim_readings_recover(
    real: RealDraStack, dra_pods: DraPods, provider: Provider
) -> None:
    reason = provider.kubelet_restart_unsupported()
    if reason:
        pytest.skip(reason)
    before = dra_pods.with_template()
    [held] = real.claimed_uuids(before)
    real.wait_rows({held: 1}, WITHIN, "the held claim")

    provider.restart_kubelet(real.node)
    # The kubelet deletes the node's slices when it starts; the plugin publishes
    # them again once it has registered anew.
    gpus = len(real.expectation.uuids)
    wait_until(
        lambda: len(real.driver.devices()) == gpus,
        90,
        "the driver's ResourceSlice back after the kubelet restart",
        interval=0.5,
        diagnostics=real.diagnostics,
    )
    # A claim made after the restart shows beside the held one only once the
    # watcher reads the new kubelet, and the held one must be there with it.
    after = dra_pods.with_template()
    claims = Counter([held, *real.claimed_uuids(after)])
    took = real.wait_rows(dict(claims), WITHIN, "the held and a new claim after the restart")
    timings.note("held and new claim in nvidia-smi, after the new pod ran", took)
    assert apps(real) == named(real, {before: [held], after: real.claimed_uuids(after)})
    real.delete_pods([before, after])
    real.wait_rows({}, WITHIN, "every GPU idle")
