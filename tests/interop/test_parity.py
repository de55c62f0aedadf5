"""Issue 6, test 4: our watcher against `nvml-mock-ctl watch-allocations`.

Both run, one after the other, against the same fake kubelet state, each into
its own overrides file. Where upstream is correct the memory blocks must be
identical. For the known upstream gaps (time-slicing/MPS `::N` replica ids and
the renamed `nvidia.com/gpu.shared` resource) ours must be right and
upstream's wrong; both halves are asserted, so this test notices if upstream
fixes a gap.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devtools.documents import ACTIVITY, PROCESSES, load, memory, processes, same, without
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.upstream import Ctl, Upstream, allocwatch_once
from devtools.waiting import wait_until
from tests.conftest import A100_APERTURE, A100_HALF, A100_UUIDS

pytestmark = pytest.mark.timing


def two_containers(namespace: str, name: str, first: str, second: str) -> dict[str, Any]:
    def container(cname: str, device: str) -> dict[str, Any]:
        gpu = {"resource_name": "nvidia.com/gpu", "device_ids": [device]}
        return {"name": cname, "devices": [gpu]}

    return {
        "namespace": namespace,
        "name": name,
        "containers": [container("init", first), container("main", second)],
    }


# Claims that upstream handles correctly.
COMMON = [
    gpu_pod("ml", "one", [A100_UUIDS[0]]),  # dev0: 1 claim
    gpu_pod("ml", "share-a", [A100_UUIDS[1]]),  # dev1: 2 pods on one GPU
    gpu_pod("ml", "share-b", [A100_UUIDS[1]]),
    gpu_pod("ml", "multi", [A100_UUIDS[2], A100_UUIDS[2], A100_UUIDS[2]]),  # dev2: 3, clamped
    two_containers("ml", "sidecar", A100_UUIDS[4], A100_UUIDS[3]),  # dev3 + dev4: 1 each
    gpu_pod("ml", "ghost", ["GPU-does-not-exist"]),  # unknown: nothing
    gpu_pod("ml", "amd", [A100_UUIDS[6]], resource="amd.com/gpu"),  # other vendor: nothing
    gpu_pod("ml", "nic", ["net-0"], resource="intel.com/sriov_netdevice"),
    {"namespace": "ml", "name": "cpu-only", "containers": [{"name": "main", "devices": []}]},
]
# Claims upstream misses: replica ids and the renamed shared resource.
GAPS = [
    gpu_pod("ml", "slice-0", [A100_UUIDS[5] + "::0"]),  # dev5: 2 replicas
    gpu_pod("ml", "slice-1", [A100_UUIDS[5] + "::1"]),
    gpu_pod("ml", "shared", [A100_UUIDS[6]], resource="nvidia.com/gpu.shared"),  # dev6: 1
    gpu_pod("ml", "mps", [A100_UUIDS[7] + "::3"]),  # dev7: 1 replica + 1 plain
    gpu_pod("ml", "plain", [A100_UUIDS[7]]),
]


def block(claims: list[int]) -> dict[str, dict[str, int]]:
    out = {}
    for i, n in enumerate(claims):
        used = min(A100_HALF * n, A100_APERTURE)
        out[str(i)] = {"used_bytes": used, "free_bytes": A100_APERTURE - used}
    return out


def run_upstream(
    upstream: Upstream, kubelet: FakePodResourcesLister, config: Path, target: Path
) -> None:
    """Run watch-allocations until it has published once, then stop it (exit 0)."""
    ctl = Ctl(upstream, target, config)
    proc = subprocess.Popen(
        [
            str(upstream.ctl),
            "watch-allocations",
            "--socket",
            kubelet.socket_path,
            "--interval",
            "100ms",
            "--used-fraction",
            "0.5",
        ],
        env=ctl.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(memory(load(target))) == 8, 15, "upstream's first publish")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert out.startswith("watch-allocations: 8 GPUs"), out


def test_same_where_upstream_is_right(
    upstream: Upstream, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    config = config_dir / "config.yaml"
    kubelet.set_pods(COMMON)
    theirs, ours = config_dir / "upstream.yaml", config_dir / "ours.yaml"
    run_upstream(upstream, kubelet, config, theirs)
    allocwatch_once(kubelet, config, ours)
    want = block([1, 2, 3, 1, 1, 0, 0, 0])
    assert same(memory(load(theirs)), want)
    assert same(memory(load(ours)), want)

    # Drop-in: on upstream's own file, with the same state, we find nothing to change
    # (upstream publishes no processes, so neither do we for this comparison).
    before = (theirs.stat().st_ino, theirs.stat().st_mtime_ns, theirs.read_bytes())
    allocwatch_once(kubelet, config, theirs, "--no-processes", "--no-activity")
    assert (theirs.stat().st_ino, theirs.stat().st_mtime_ns, theirs.read_bytes()) == before
    # By default the only changes are a `processes` list on each claimed device,
    # and every device's utilization, power and temperature.
    upstream_doc = load(theirs)
    allocwatch_once(kubelet, config, theirs)
    assert same(without(load(theirs), PROCESSES + ACTIVITY), upstream_doc)
    assert sorted(processes(load(theirs))) == ["0", "1", "2", "3", "4"]


def test_known_upstream_gaps(
    upstream: Upstream, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    config = config_dir / "config.yaml"
    kubelet.set_pods(COMMON + GAPS)
    theirs, ours = config_dir / "upstream.yaml", config_dir / "ours.yaml"
    run_upstream(upstream, kubelet, config, theirs)
    allocwatch_once(kubelet, config, ours)
    upstream_mem, our_mem = memory(load(theirs)), memory(load(ours))

    right = block([1, 2, 3, 1, 1, 2, 1, 2])
    upstream_sees = block([1, 2, 3, 1, 1, 0, 0, 1])  # replicas and gpu.shared ignored
    assert same(our_mem, right)
    assert same(upstream_mem, upstream_sees)
    # identical on every device the gaps do not touch
    for dev in ("0", "1", "2", "3", "4"):
        assert same(our_mem[dev], upstream_mem[dev]), dev
    for dev in ("5", "6", "7"):
        assert not same(our_mem[dev], upstream_mem[dev]), dev
