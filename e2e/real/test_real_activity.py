"""Utilization, power and temperature beside NVIDIA's nvml-mock, as `nvidia-smi` reads them.

`nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw,temperature.gpu`
in the node view: a claimed GPU is busy, drawing power and warm within what the
suite's own arithmetic gives for the profile (framework/expected.py), the others
read idle, and all return to idle when the pods go. Time-sliced, a GPU reads
busier than one claim makes it. A `nvml-mock-ctl util` pin holds through pods
coming and going.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from devtools.waiting import wait_until
from e2e.framework.realstack import NODE_VIEW, RealStack
from e2e.real.conftest import GpuPod

FIELDS = ["index", "utilization.gpu", "utilization.memory", "power.draw", "temperature.gpu"]
SAMPLES = 5
WITHIN = 30.0
Bounds = dict[str, tuple[float, float]]


def bounds(real: RealStack, index: int, claims: int) -> Bounds:
    """What GPU `index` may read with `claims` claims, from its expected blocks."""
    device = next(d for d in real.expectation.devices if d.index == index)
    assert device.power is not None and device.thermal is not None
    blocks = real.expectation.activity({index: claims})[str(index)]
    if claims == 0:  # the profile's static idle values
        idle_w = device.power.idle / 1000
        return {
            "gpu": (0, 0),
            "memory": (0, 0),
            "power": (idle_w, idle_w),
            "temperature": (device.thermal.idle, device.thermal.idle),
        }
    util, power, temp = blocks["utilization"], blocks["power"], blocks["temperature"]
    low_w = max(power["base_mw"] - power["variance_mw"], device.power.minimum) / 1000
    high_w = min(power["base_mw"] + power["variance_mw"], device.power.maximum) / 1000
    return {
        "gpu": (util["gpu_min"], util["gpu_max"]),
        "memory": (util["memory_min"], util["memory_max"]),
        "power": (low_w, high_w),
        "temperature": (temp["base_c"] - temp["variance_c"], temp["base_c"] + temp["variance_c"]),
    }


def read(real: RealStack) -> dict[int, dict[str, float]]:
    rows = real.smi.query(real.workload_ns, NODE_VIEW, FIELDS)
    return {
        int(index): {
            "gpu": float(g),
            "memory": float(m),
            "power": float(p),
            "temperature": float(t),
        }
        for index, g, m, p, t in rows
    }


def fits(reading: dict[str, float], want: Bounds) -> bool:
    return all(lo - 0.01 <= reading[key] <= hi + 0.01 for key, (lo, hi) in want.items())


def wait_reads(real: RealStack, want: dict[int, Bounds], what: str) -> None:
    """nvidia-smi fits `want` (index -> bounds), then SAMPLES reads in a row do too."""

    def all_fit() -> bool:
        now = read(real)
        return all(fits(now[i], w) for i, w in want.items())

    wait_until(all_fit, WITHIN, f"{what}: nvidia-smi within {want}", diagnostics=real.diagnostics)
    for _ in range(SAMPLES):
        now = read(real)
        for index, w in want.items():
            assert fits(now[index], w), (what, index, now[index], w)


def index_of(real: RealStack, uuid: str) -> int:
    return real.expectation.index_of(uuid)


def own_index(real: RealStack, pod: str) -> int:
    (row,) = real.smi.rows(real.workload_ns, pod)
    return index_of(real, row.uuid)


def everywhere(real: RealStack, claims: Counter[int]) -> dict[int, Bounds]:
    return {d.index: bounds(real, d.index, claims[d.index]) for d in real.expectation.devices}


def test_1_a_claimed_gpu_is_busy_warm_and_drawing_and_returns_to_idle(
    real: RealStack, gpu_pod: GpuPod
) -> None:
    wait_reads(real, everywhere(real, Counter()), "an idle node")
    pod = gpu_pod()
    mine = own_index(real, pod)
    wait_reads(real, everywhere(real, Counter({mine: 1})), "its GPU busy, the others idle")
    real.delete_pods([pod])
    wait_reads(real, everywhere(real, Counter()), "idle again")


def test_2_a_util_pin_holds_through_pods_coming_and_going(real: RealStack, gpu_pod: GpuPod) -> None:
    real.ctl("util", "--gpu", "1", "33")
    try:
        for _ in range(2):
            pods = [gpu_pod() for _ in range(2)]
            claims = Counter(own_index(real, pod) for pod in pods)
            want = everywhere(real, claims)
            want[1] = {"gpu": (33, 33), "memory": (33, 33)}
            wait_reads(real, want, "the pin on GPU 1, the rest following the pods")
            real.delete_pods(pods)
    finally:
        real.ctl("reset", "--gpu", "1")
    wait_reads(real, everywhere(real, Counter()), "idle after the reset")


def test_3_time_sliced_a_gpu_reads_busier(real: RealStack, gpu_pod: GpuPod) -> None:
    real.deploy_plugin(replicas=2)
    pods = [gpu_pod() for _ in range(len(real.expectation.uuids) + 1)]
    claims = Counter(own_index(real, pod) for pod in pods)
    assert max(claims.values()) == 2, claims
    shared = claims.most_common(1)[0][0]
    want: dict[int, Any] = everywhere(real, claims)
    assert want[shared]["gpu"][0] > bounds(real, shared, 1)["gpu"][1]  # busier than any one
    wait_reads(real, want, "the shared GPU busier than the others")
    real.delete_pods(pods)
    wait_reads(real, everywhere(real, Counter()), "every GPU idle")
