"""14. The API server away: readings keep following the kubelet.

Pod annotations reach allocwatch through the API server, but only as a hint.
With the API server stopped, an annotated pod keeps the load it declared, a
pod whose container ends stops counting as soon as the kubelet drops its
claim, the watcher stays ready, and its metric says the annotations are stale
until the API server is back. Meanwhile the suite reads the node from this
machine (framework/hostexec.py), since kubectl exec needs the API server too.
"""

from __future__ import annotations

import pytest

from devtools.waiting import wait_until
from e2e.framework.expected import Expectation
from e2e.framework.hostexec import HostExec
from e2e.framework.providers import Provider
from e2e.framework.stack import GpuPods, Stack

WITHIN = 20.0
STALE = "allocwatch_declared_load_stale"
GIB = 2**30


def test_readings_follow_the_kubelet_while_the_api_server_is_away(
    deployed: Stack, expect: Expectation, gpu_pods: GpuPods, provider: Provider
) -> None:
    reason = provider.api_server_stop_unsupported()
    if reason:
        pytest.skip(reason)
    deployed.watcher.wait_readings(expect.idle(), WITHIN, "an idle node")
    declared, plain = gpu_pods(annotations={"allocwatch.dev/gpu-memory": "2Gi"}), gpu_pods()
    (declared_uuid,) = deployed.workloads.visible_devices(declared)
    (plain_uuid,) = deployed.workloads.visible_devices(plain)
    index = expect.index_of(declared_uuid)
    only_plain = expect.readings(expect.claims_for([plain_uuid]))
    both = {
        **only_plain,
        str(index): {"used_bytes": 2 * GIB, "free_bytes": expect.aperture(index) - 2 * GIB},
    }
    deployed.watcher.wait_readings(both, WITHIN, "the declared and the default claim")

    watcher = deployed.watcher.pod()
    host = HostExec(deployed.kubectl)
    for pod in (watcher, declared):
        host.remember(deployed.ns, pod)
    assert deployed.watcher.metric(watcher, STALE) == 0

    with provider.api_server_stopped(), deployed.kubectl.exec_through(host):
        wait_until(
            lambda: deployed.watcher.metric(watcher, STALE) == 1,
            WITHIN,
            "the watcher to say the annotations are stale",
        )
        assert deployed.watcher.readyz(watcher)[0] == 200
        assert deployed.watcher.readings() == both, "the last annotations seen still hold"
        host.kill(deployed.ns, declared)
        deployed.watcher.wait_readings(only_plain, WITHIN, "the ended pod's claim gone")
        assert deployed.watcher.readyz(watcher)[0] == 200

    wait_until(
        lambda: deployed.watcher.metric(watcher, STALE) == 0,
        90,
        "the annotations current again with the API server back",
    )
    deployed.watcher.wait_readings(only_plain, WITHIN, "the readings after the API server's return")
