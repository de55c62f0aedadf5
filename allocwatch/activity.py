"""Claims → how busy, warm and power-hungry each GPU reads. Pure: no I/O, no clock.

Each claim has a busy band, the percentages its GPU's utilization moves
within: the default (`--busy-utilization`, 70-90) or what its pod declares;
0 means allocated but not computing. Claims on one GPU add up as independent
loads do (1 - product of (1 - u) over its claims), so more claims never
read less busy than fewer, and never above 100 %.

What allocwatch writes, under `devices["<i>"].dynamic_metrics`, drives the
engine's own simulator, which samples a new value at every NVML call: the
GPU reads as busy as a real one, varying, with one write when claims change.

* `utilization`: a claimed GPU moves within its band (pattern `steady`);
  memory-bandwidth utilization within MEMORY_SHARE of it. An idle GPU reads
  0: pattern `idle` over 0-1, whose lowest quarter is 0 (the simulator reads
  min = max = 0 as 0-100, so that cannot say it).
* `power`: from the idle draw towards the limit, in proportion to the band
  (idle + u x (limit - idle)); the engine keeps it within the profile's
  min/max. `temperature`: from idle towards `target_temperature_c` likewise,
  kept below the slowdown threshold. An idle GPU gets `null` for both, which
  turns the sub-simulator off so the profile's static idle value shows: a
  dynamic base would be clamped up to min_limit_mw, which can lie above the
  idle draw (t4: 12 W idle, 60 W minimum).
* A value the profile cannot give (no power block, no idle draw or limit, no
  idle or target temperature) is left alone: no key, which `readings` reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from allocwatch.profile import Device


class Band(NamedTuple):
    """Percentages, 0 <= lo <= hi <= 100."""

    lo: int
    hi: int

    def __str__(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


DEFAULT_BUSY = Band(70, 90)
IDLE = Band(0, 0)
# A busy GPU's memory bandwidth reads well below its SM activity: 3/7 of the
# band's low end to 2/3 of its high end turns the default 70-90 into 30-60.
MEMORY_SHARE = (3 / 7, 2 / 3)
IDLE_UTILIZATION = {"pattern": "idle", "gpu_min": 0, "gpu_max": 1, "memory_min": 0, "memory_max": 1}


def combined(bands: Sequence[Band]) -> Band:
    """The band of a GPU holding claims of these bands."""
    lo = hi = 1.0
    for band in bands:
        lo *= 1 - band.lo / 100
        hi *= 1 - band.hi / 100
    return Band(round(100 * (1 - lo)), round(100 * (1 - hi)))


def memory_band(gpu: Band) -> Band:
    low, high = MEMORY_SHARE
    return Band(math.floor(gpu.lo * low), math.ceil(gpu.hi * high))


def _mid(band: Band) -> float:
    return (band.lo + band.hi) / 200


def _half(band: Band) -> float:
    return (band.hi - band.lo) / 200


@dataclass(frozen=True)
class Activity:
    """A device's dynamic_metrics blocks; None for `null` (idle: the static value shows)."""

    utilization: dict[str, Any]
    power: dict[str, int] | None
    temperature: dict[str, int] | None
    # "power" or "temperature" -> why the profile cannot give it: left alone
    left: dict[str, str]


def activity(device: Device, bands: Sequence[Band]) -> Activity:
    band = combined(bands)
    left = _underivable(device)
    if band.hi == 0:
        return Activity(IDLE_UTILIZATION, None, None, left)
    memory = memory_band(band)
    utilization = {
        "pattern": "steady",
        "gpu_min": band.lo,
        "gpu_max": band.hi,
        "memory_min": memory.lo,
        "memory_max": memory.hi,
    }
    power = temperature = None
    if device.power is not None and "power" not in left:
        p = device.power
        span = max(p.limit - p.idle, 0)
        base = round(p.idle + _mid(band) * span)
        if p.minimum:
            base = max(base, p.minimum)
        if p.maximum:
            base = min(base, p.maximum)
        power = {"base_mw": base, "variance_mw": round(_half(band) * span)}
    if device.thermal is not None and "temperature" not in left:
        t = device.thermal
        span = max(t.target - t.idle, 0)
        base, variance = round(t.idle + _mid(band) * span), round(_half(band) * span)
        ceiling = (t.slowdown or t.shutdown) - 1
        if ceiling > 0:
            base = min(base, ceiling)
            variance = max(0, min(variance, ceiling - base))
        temperature = {"base_c": base, "ramp_c": 0, "variance_c": variance}
    return Activity(utilization, power, temperature, left)


def _underivable(device: Device) -> dict[str, str]:
    left = {}
    if device.power is None:
        left["power"] = "no power block"
    elif not (device.power.idle and device.power.limit):
        left["power"] = "no power.current_draw_mw, or no limit"
    if device.thermal is None:
        left["temperature"] = "no thermal block"
    elif not (device.thermal.idle and device.thermal.target):
        left["temperature"] = "no thermal.temperature_gpu_c, or no target_temperature_c"
    return left


def process_utilization(bands: Sequence[Band]) -> list[tuple[int, int]]:
    """(sm_util, mem_util) of each claim: its share of its GPU's mid-band
    utilization, in proportion to its own band, so they add up to at most that.
    In integers, so the shares are exactly as documented."""
    gpu = combined(bands)
    memory = memory_band(gpu)
    weights = [band.lo + band.hi for band in bands]
    total = 2 * sum(weights)
    if not total:
        return [(0, 0)] * len(bands)
    return [
        ((gpu.lo + gpu.hi) * weight // total, (memory.lo + memory.hi) * weight // total)
        for weight in weights
    ]
