"""5. A foreign temperature pin, written under nvml-mock's lock, survives our publishes.

The node helper plays a slow `nvml-mock-ctl`: it holds the lock while a GPU
pod starts, so the watcher's publish must wait (and, after its lock timeout,
give up and retry), must not touch the file meanwhile, and must then merge
its reading into what the helper wrote.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from allocwatch.metrics import PollOutcome
from devtools.waiting import wait_until
from e2e.framework.expected import Expectation, Processes, merged, temperature_pin
from e2e.framework.stack import RESOURCE, GpuPods, Stack

PIN = temperature_pin(85)  # what `nvml-mock-ctl temp 85` writes
# what the watcher counts when its publish could not take the lock in time
BLOCKED = f'allocwatch_polls_total{{result="{PollOutcome.PUBLISH_ERROR}"}}'


@pytest.fixture
def thermal_everywhere(deployed: Stack, expect: Expectation) -> Iterator[dict[str, Any]]:
    """A temperature pin on every device, so wherever the pod lands its bucket has one.

    Yields the document as it was found, less our readings; it is put back afterwards.
    """
    deployed.watcher.wait_readings(expect.idle(), 10, "an idle node")
    with deployed.files.foreign_keys_restored(expect.idle()) as found:
        keys = [str(d.index) for d in expect.devices]
        deployed.files.patch_overrides(
            {"devices": dict.fromkeys(keys, PIN), "all": {"performance_state": "P8"}}
        )
        yield found


def document(
    expect: Expectation,
    claims: Mapping[int, int],
    state: str,
    found: Mapping[str, Any],
    processes: Processes | None = None,
) -> dict[str, Any]:
    """The whole file: what was there before, both writers' keys, nothing else.

    The pin's temperature stays on every device in place of ours; our
    utilization and power do not yield to it.
    """
    processes = processes or {}
    activity = expect.activity(claims)
    pinned = PIN["dynamic_metrics"]["temperature"]
    ours = {
        "all": {"performance_state": state},
        "devices": {
            index: {
                **PIN,
                "memory": memory,
                # ours is null where idle: kept, not a deletion as in merged()
                "dynamic_metrics": {**activity[index], "temperature": pinned},
            }
            | ({"processes": processes[index]} if index in processes else {})
            for index, memory in expect.readings(claims).items()
        },
    }
    return {"version": 1, **merged(found, ours)}


def test_a_publish_waits_for_the_lock_and_keeps_the_other_writers_keys(
    deployed: Stack, expect: Expectation, thermal_everywhere: dict[str, Any], gpu_pods: GpuPods
) -> None:
    watcher = deployed.watcher.pod()  # named now: it turns unready while it cannot publish
    blocked_before = deployed.watcher.metric(watcher, BLOCKED)
    with deployed.files.holding_lock({"all": {"performance_state": "P0"}}) as held:
        pod = gpu_pods(gpus=1)
        uuids = deployed.workloads.visible_devices(pod)
        claims = expect.claims_for(uuids)
        wait_until(
            lambda: deployed.watcher.metric(watcher, BLOCKED) > blocked_before,
            30,
            "the watcher's publish to wait for the lock and give up",
            diagnostics=deployed.diagnostics,
        )
    assert not held["changed_while_held"], held
    deployed.watcher.wait_readings(
        expect.readings(claims), 10, "the claim published after the lock"
    )
    processes = expect.processes(deployed.ns, {pod: uuids}, RESOURCE, "main")
    assert deployed.watcher.read_document()[1] == document(
        expect, claims, "P0", thermal_everywhere, processes
    )

    deployed.workloads.delete(pod)
    deployed.watcher.wait_readings(expect.idle(), 10, "the node to return to idle")
    assert deployed.watcher.read_document()[1] == document(expect, {}, "P0", thermal_everywhere)
