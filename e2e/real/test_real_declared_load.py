"""Pods declare their load beside NVIDIA's nvml-mock, as `nvidia-smi` reads it.

allocwatch installed with `declaredLoad.enabled=true` (the chart's own RBAC
and NODE_NAME) on a time-sliced node: one pod more than there are GPUs, so
two share one. Each annotated pod's GPU memory is what it declared, the plain
pod's the default share, summed per GPU by the suite's own arithmetic; an
annotation edited on a running pod moves its GPU's reading. With the API
server stopped, nvidia-smi (run from this machine, framework/hostexec.py) keeps
the declared reading and drops the claim of a pod whose container ends.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from devtools.waiting import wait_until
from e2e.framework.expected import MIB
from e2e.framework.hostexec import HostExec
from e2e.framework.providers import Provider
from e2e.framework.realstack import CHART, NODE_VIEW, RealStack

DECLARED = CHART / "ci" / "declared-load-values.yaml"
GPU_MEMORY = "allocwatch.dev/gpu-memory"
WITHIN = 30.0


def test_declared_memory_shows_in_nvidia_smi_and_an_edit_moves_it(time_sliced: RealStack) -> None:
    real = time_sliced
    real.install_allocwatch(DECLARED)
    declared: dict[str, int | None] = {}
    pods: list[str] = []
    try:
        for n in range(len(real.expectation.uuids) + 1):
            mib = None if n == 0 else 256 * n  # the first pod declares nothing
            notes = {GPU_MEMORY: f"{mib}Mi"} if mib else None
            pods.append(real.start_pod(f"declared-{n}", annotations=notes))
            declared[pods[-1]] = mib
        holders = {pod: real.smi.rows(real.workload_ns, pod)[0].uuid for pod in pods}

        def want() -> dict[str, int]:
            used: dict[str, int] = defaultdict(int)
            for pod, uuid in holders.items():
                index = real.expectation.index_of(uuid)
                asked = declared[pod]
                used[uuid] += asked * MIB if asked else real.expectation.per_claim(index)
            return {
                u: min(b, real.expectation.aperture(real.expectation.index_of(u))) // MIB
                for u, b in used.items()
            }

        def shows(expected: dict[str, int]) -> bool:
            rows = {row.uuid: row.used_mib for row in real.node_rows()}
            return all(rows[u] == mib for u, mib in expected.items())

        wait_until(
            lambda: shows(want()), WITHIN, "what each pod declared", diagnostics=real.diagnostics
        )
        edited = pods[1]
        real.workloads.annotate(edited, GPU_MEMORY, "3Gi")
        declared[edited] = 3 * 1024
        wait_until(
            lambda: shows(want()), WITHIN, "the edited annotation", diagnostics=real.diagnostics
        )
    finally:
        real.delete_pods(pods)
        real.install_allocwatch()


def test_with_the_api_server_away_nvidia_smi_follows_the_kubelet(
    real: RealStack, provider: Provider
) -> None:
    reason = provider.api_server_stop_unsupported()
    if reason:
        pytest.skip(reason)
    real.install_allocwatch(DECLARED)
    pods: list[str] = []
    try:
        pods.append(real.start_pod("away-declared", annotations={GPU_MEMORY: "1Gi"}))
        pods.append(real.start_pod("away-ending"))
        declared, ending = (real.smi.rows(real.workload_ns, pod)[0].uuid for pod in pods)
        ending_index = real.expectation.index_of(ending)

        def shows(expected: dict[str, int]) -> bool:
            rows = {row.uuid: row.used_mib for row in real.node_rows()}
            return all(rows[u] == mib for u, mib in expected.items())

        both = {declared: 1024, ending: real.expectation.per_claim(ending_index) // MIB}
        wait_until(lambda: shows(both), WITHIN, "both claims", diagnostics=real.diagnostics)
        host = HostExec(real.kubectl)
        host.remember(real.workload_ns, NODE_VIEW)
        host.remember(real.workload_ns, pods[1])
        with provider.api_server_stopped(), real.kubectl.exec_through(host):
            assert shows(both), "the declared reading holds with the API server away"
            host.kill(real.workload_ns, pods[1])
            wait_until(lambda: shows({declared: 1024, ending: 0}), WITHIN, "the ended claim gone")
    finally:
        real.delete_pods(pods)
        real.install_allocwatch()
