"""allocwatch beside NVIDIA's nvml-mock, device plugin and nvidia-smi, read as a user reads it.

Every reading is `nvidia-smi` output in a pod, through the mock library that
nvml-mock's NRI plugin injects. The expected MiB come from the profile the
library loads, by the suite's own arithmetic (framework/expected.py).
"""

from __future__ import annotations

from collections import Counter

from e2e.framework import timings
from e2e.framework.realstack import CHART, NODE_VIEW, RealStack
from e2e.real.conftest import GpuPod

# The engine re-reads overrides.yaml at most this often (MOCK_NVML_OVERRIDES_TTL).
ENGINE_TTL = 1.0
# nodeSelector without nvml-mock's label: every node
ANY_NODE = CHART / "ci" / "any-node-values.yaml"
# Generous deadlines for the waits; the bounds the issue sets are asserted on
# the measured times.
WITHIN = 30.0


def bound(real: RealStack) -> float:
    """How soon nvidia-smi must show a change allocwatch publishes."""
    return real.interval + ENGINE_TTL + 1.0


def own_view(real: RealStack, pod: str) -> str:
    """The one GPU the pod sees (the device plugin passes only its device node)."""
    rows = real.smi.rows(real.workload_ns, pod)
    assert len(rows) == 1, rows
    return rows[0].uuid


def test_1_idle_every_gpu_reads_zero(real: RealStack) -> None:
    real.wait_rows({}, WITHIN, "an idle node")
    assert all(row.used_mib == 0 for row in real.node_rows())


def test_2_one_gpu_pod_moves_its_gpu_and_returns(real: RealStack, gpu_pod: GpuPod) -> None:
    real.wait_rows({}, WITHIN, "an idle node")
    pod = gpu_pod()
    uuid = own_view(real, pod)
    real.wait_rows({uuid: 1}, WITHIN, "its GPU to rise, the others idle")
    (mine,) = [row for row in real.expected({uuid: 1}) if row.uuid == uuid]
    assert mine.used_mib > 0
    assert real.smi.rows(real.workload_ns, pod) == [mine]

    real.delete_pods([pod])
    took = real.wait_rows({}, WITHIN, "its GPU back to idle")
    timings.note("idle in nvidia-smi after the pod is gone", took)
    assert took <= bound(real), f"idle after {took:.2f}s, bound {bound(real):.2f}s"


def test_3_nvml_mock_ctl_alongside_loses_no_edit(real: RealStack, gpu_pod: GpuPod) -> None:
    first = gpu_pod()
    real.ctl("temp", "--gpu", "1", "71")
    second = gpu_pod()
    # a failure that never fires in nvidia-smi's few calls, but stays in the file
    real.ctl("fail", "--gpu", "3", "--mode", "ecc_uncorrectable", "--after-calls", "1000000")
    real.delete_pods([first])
    real.ctl("temp", "--gpu", "2", "72")
    third = gpu_pod()
    real.delete_pods([second])
    try:
        real.wait_rows({own_view(real, third): 1}, WITHIN, "our readings beside theirs")
        temperatures = dict(
            real.smi.query(real.workload_ns, NODE_VIEW, ["index", "temperature.gpu"])
        )
        assert temperatures["1"] == "71" and temperatures["2"] == "72", temperatures
        devices = {str(k): v for k, v in real.overrides()["devices"].items()}
        assert devices["3"]["failure"]["mode"] == "ecc_uncorrectable", devices
    finally:
        real.ctl("reset", "--gpu", "all")
    # reset removed every device's bucket, ours too: allocwatch puts its keys back
    took = real.wait_rows({own_view(real, third): 1}, WITHIN, "readings back after reset")
    timings.note("readings back in nvidia-smi after nvml-mock-ctl reset", took)
    assert took <= bound(real), f"back after {took:.2f}s, bound {bound(real):.2f}s"


def test_4_nvml_mock_restart_default_values_follow_the_label(
    real: RealStack, gpu_pod: GpuPod
) -> None:
    """nvml-mock's preStop unlabels the node, so the chart's default nodeSelector takes
    the watcher pod away with it and brings a new one back with the label."""
    pod = gpu_pod()
    uuid = own_view(real, pod)
    real.wait_rows({uuid: 1}, WITHIN, "its GPU to rise")
    before = real.watcher_pod()["metadata"]["uid"]
    real.restart_nvml_mock()
    took = real.wait_rows({uuid: 1}, WITHIN, "readings back after nvml-mock's restart")
    after = real.watcher_pod()["metadata"]["uid"]
    assert after != before, "the watcher pod stayed on an unlabelled node"
    timings.note("readings back, new watcher pod (default nodeSelector)", took)


def test_5_nvml_mock_restart_on_every_node_same_pod(real: RealStack, gpu_pod: GpuPod) -> None:
    """With a selector nvml-mock does not touch, the same watcher pod rides the restart
    through and republishes within one interval of the driver root coming back."""
    real.install_allocwatch(ANY_NODE)
    try:
        pod = gpu_pod()
        uuid = own_view(real, pod)
        real.wait_rows({uuid: 1}, WITHIN, "its GPU to rise")
        before = real.watcher_pod()
        real.restart_nvml_mock()
        took = real.wait_rows({uuid: 1}, WITHIN, "readings back after nvml-mock's restart")
        timings.note("readings back, same watcher pod (every node)", took)
        assert took <= bound(real), f"back after {took:.2f}s, bound {bound(real):.2f}s"
        after = real.watcher_pod()
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        restarts = [c["restartCount"] for c in after["status"]["containerStatuses"]]
        assert restarts == [0], restarts
    finally:
        real.install_allocwatch()


def test_6_uninstall_leaves_idle_and_their_overrides(real: RealStack, gpu_pod: GpuPod) -> None:
    pod = gpu_pod()
    uuid = own_view(real, pod)
    real.wait_rows({uuid: 1}, WITHIN, "its GPU to rise")
    real.ctl("temp", "--gpu", "0", "66")
    try:
        real.uninstall_allocwatch()
        took = real.wait_rows({}, WITHIN, "idle everywhere after helm uninstall")
        timings.note("idle in nvidia-smi after helm uninstall --wait", took)
        assert [row.used_mib for row in real.smi.rows(real.workload_ns, pod)] == [0]
        temperatures = dict(
            real.smi.query(real.workload_ns, NODE_VIEW, ["index", "temperature.gpu"])
        )
        assert temperatures["0"] == "66", temperatures
    finally:
        real.ctl("reset", "--gpu", "0")


def test_7_time_slicing_two_pods_on_one_gpu(time_sliced: RealStack, gpu_pod: GpuPod) -> None:
    real = time_sliced
    # One pod more than there are GPUs: two of them share one.
    pods = [gpu_pod() for _ in range(len(real.expectation.uuids) + 1)]
    holders = {pod: own_view(real, pod) for pod in pods}
    claims = Counter(holders.values())
    assert max(claims.values()) == 2, claims
    real.wait_rows(dict(claims), WITHIN, "two claims' worth on the shared GPU")
    # the Processes table names each pod on its GPU, with its share
    apps = real.smi.apps(real.workload_ns, NODE_VIEW)
    per_claim = {row.uuid: row.used_mib // claims[row.uuid] for row in real.node_rows()}
    assert sorted(apps) == sorted(
        [uuid, f"{real.workload_ns}/{pod}/main", str(per_claim[uuid])]
        for pod, uuid in holders.items()
    ), apps
    real.delete_pods(pods)
    real.wait_rows({}, WITHIN, "every GPU idle")
