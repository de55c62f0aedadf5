"""11. Each GPU pod is an NVML process on its GPU, and the list empties when the pods go.

The document's `devices["<i>"].processes` must name exactly the running GPU
pods (`<namespace>/<pod>/<container>`), with the documented synthetic pid and
each claim's share of the GPU's used bytes in whole MiB; a GPU without claims
has no `processes` key, so the profile's own list shows.
"""

from __future__ import annotations

from e2e.framework.expected import Expectation, process_lists
from e2e.framework.stack import RESOURCE, GpuPods, Stack

WITHIN = 10.0
CONTAINER = "main"  # the GPU pod's one container (manifests/gpu-pod.yaml.j2)


def test_the_processes_name_the_running_gpu_pods_and_empty_when_they_go(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods
) -> None:
    deployed.watcher.wait_readings(expect.idle(), WITHIN, "an idle node")
    assert process_lists(deployed.watcher.read_document()[1]) == {}

    first, second = gpu_pods(gpus=1), gpu_pods(gpus=2)
    held = {pod: deployed.workloads.visible_devices(pod) for pod in (first, second)}
    assert sum(len(uuids) for uuids in held.values()) == 3, held

    def processes(pods: dict[str, list[str]]) -> dict[str, list[dict[str, object]]]:
        return expect.processes(deployed.ns, pods, RESOURCE, CONTAINER)

    found = deployed.watcher.wait_processes(
        processes(held), WITHIN, "the GPU pods to be listed as processes"
    )
    assert sorted(found) == sorted(str(expect.index_of(u)) for u in set(held[first] + held[second]))
    pids = [entry["pid"] for entries in found.values() for entry in entries]
    assert len(pids) == len(set(pids)), found
    assert deployed.watcher.readings() == expect.readings(
        expect.claims_for(held[first] + held[second])
    )

    deployed.workloads.delete(first)
    deployed.watcher.wait_processes(
        processes({second: held[second]}), WITHIN, f"{first} to leave the processes"
    )
    deployed.workloads.delete(second)
    deployed.watcher.wait_processes({}, WITHIN, "the processes to empty")
    deployed.watcher.wait_readings(expect.idle(), WITHIN, "the node to return to idle")
