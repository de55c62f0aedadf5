"""Pods declare their load beside NVIDIA's nvml-mock, as `nvidia-smi` reads it.

allocwatch installed with `declaredLoad.enabled=true` (the chart's own RBAC
and NODE_NAME) on a time-sliced node: one pod more than there are GPUs, so
two share one. Each annotated pod's GPU memory is what it declared, the plain
pod's the default share, summed per GPU by the suite's own arithmetic; an
annotation edited on a running pod moves its GPU's reading.
"""

from __future__ import annotations

from collections import defaultdict

from devtools.waiting import wait_until
from e2e.framework.expected import MIB
from e2e.framework.realstack import CHART, RealStack

DECLARED = CHART / "ci" / "declared-load-values.yaml"
GPU_MEMORY = "allocwatch.dev/gpu-memory"
WITHIN = 30.0


def test_declared_memory_shows_in_nvidia_smi_and_an_edit_moves_it(real: RealStack) -> None:
    real.install_allocwatch(DECLARED)
    real.deploy_plugin(replicas=2)
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
