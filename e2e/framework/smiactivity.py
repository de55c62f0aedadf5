"""Utilization, power and temperature as `nvidia-smi` in the node view reads them,
against the bounds the suite's own arithmetic gives (framework/expected.py).

Shared by the real stack and its DRA variant.
"""

from __future__ import annotations

from collections import Counter

from devtools.waiting import wait_until

from .realstack import NODE_VIEW, RealStack

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
