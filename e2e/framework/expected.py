"""The readings allocwatch must publish, computed independently from the profile.

Per nvml-mock's contract: aperture = total - reserved (0 if negative),
per = int(float(aperture) * fraction), used = min(per * claims, aperture),
free = aperture - used. Nothing here comes from allocwatch's own code but
the file mode and the profile's device list: an oracle that shared the code
under test could not catch its bugs.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from allocwatch.document import FILE_MODE
from allocwatch.profile import Device
from devtools.documents import ACTIVITY, MEMORY, PROCESSES, memory, processes, without

Readings = dict[str, dict[str, int]]
Processes = dict[str, list[dict[str, Any]]]
Activity = dict[str, dict[str, Any]]  # "<index>" -> {"utilization": ..., "power": ..., ...}

# The documented pid derivation (allocwatch.processes), written out again here.
PID_BASE, PID_SPAN = 10_000_000, 90_000_000
MIB = 2**20


@dataclass(frozen=True)
class Expectation:
    devices: Sequence[Device]
    fraction: float

    def index_of(self, uuid: str) -> int:
        for device in self.devices:
            if device.uuid == uuid:
                return device.index
        raise KeyError(f"{uuid} is not in the profile")

    @property
    def uuids(self) -> list[str]:
        """The UUIDs a device plugin can advertise (devices without one are skipped)."""
        return [d.uuid for d in self.devices if d.uuid]

    def aperture(self, index: int) -> int:
        device = next(d for d in self.devices if d.index == index)
        return max(device.total_bytes - device.reserved_bytes, 0)

    def per_claim(self, index: int) -> int:
        return int(float(self.aperture(index)) * self.fraction)

    def readings(self, claims: Mapping[int, int] | None = None) -> Readings:
        """{"<index>": {"used_bytes": u, "free_bytes": f}} for every device with memory."""
        claims = claims or {}
        out: Readings = {}
        for device in self.devices:
            if not device.has_memory:
                continue  # allocwatch publishes nothing for it
            aperture = self.aperture(device.index)
            used = min(self.per_claim(device.index) * claims.get(device.index, 0), aperture)
            out[str(device.index)] = {"used_bytes": used, "free_bytes": aperture - used}
        return out

    def idle(self) -> Readings:
        return self.readings({})

    def processes(
        self, namespace: str, pods: Mapping[str, Sequence[str]], resource: str, container: str
    ) -> Processes:
        """{"<index>": [entry, ...]}: each pod's claims (`pods`: name -> uuids) as NVML
        processes, each holding its equal share of the device's used bytes in whole MiB."""
        claims = sorted(
            (namespace, pod, container, resource, uuid)
            for pod, uuids in pods.items()
            for uuid in uuids
        )
        counts = self.claims_for([claim[4] for claim in claims])
        used = self.readings(counts)
        activity = self.activity(counts)
        out: Processes = {}
        for claim in claims:
            index = self.index_of(claim[4])
            util = activity[str(index)]["utilization"]
            digest = hashlib.blake2b("\0".join(claim).encode(), digest_size=8).digest()
            out.setdefault(str(index), []).append(
                {
                    "pid": PID_BASE + int.from_bytes(digest, "big") % PID_SPAN,
                    "type": "C",
                    "name": f"{namespace}/{claim[1]}/{container}"[:255],
                    "used_memory_mib": used[str(index)]["used_bytes"] // counts[index] // MIB,
                    # an equal share of the GPU's mid-band utilization each
                    "sm_util": (util["gpu_min"] + util["gpu_max"]) // (2 * counts[index]),
                    "mem_util": (util["memory_min"] + util["memory_max"]) // (2 * counts[index]),
                }
            )
        return out

    def activity(self, claims: Mapping[int, int] | None = None) -> Activity:
        """{"<index>": its dynamic_metrics blocks} for every device with memory, each
        claim at the default busy band: the documented rules, worked out here again."""
        claims = claims or {}
        out: Activity = {}
        for device in self.devices:
            if not device.has_memory:
                continue
            n = claims.get(device.index, 0)
            lo, hi = round(100 * (1 - 0.3**n)), round(100 * (1 - 0.1**n))  # 70-90 each
            if hi == 0:
                blocks: dict[str, Any] = {
                    "utilization": {"pattern": "idle", "gpu_min": 0, "gpu_max": 1,
                                    "memory_min": 0, "memory_max": 1},
                    "power": None,
                    "temperature": None,
                }  # fmt: skip
            else:
                mid, half = (lo + hi) / 200, (hi - lo) / 200
                power, thermal = device.power, device.thermal
                assert power is not None and thermal is not None, "the e2e profile gives both"
                span = power.limit - power.idle
                base = min(max(round(power.idle + mid * span), power.minimum), power.maximum)
                t_span = thermal.target - thermal.idle
                t_base = min(round(thermal.idle + mid * t_span), thermal.slowdown - 1)
                t_var = min(round(half * t_span), thermal.slowdown - 1 - t_base)
                blocks = {
                    "utilization": {"pattern": "steady", "gpu_min": lo, "gpu_max": hi,
                                    "memory_min": lo * 3 // 7, "memory_max": -(-hi * 2 // 3)},
                    "power": {"base_mw": base, "variance_mw": round(half * span)},
                    "temperature": {"base_c": t_base, "ramp_c": 0, "variance_c": t_var},
                }  # fmt: skip
            out[str(device.index)] = blocks
        return out

    def claims_for(self, uuids: Sequence[str]) -> dict[int, int]:
        counts: dict[int, int] = {}
        for uuid in uuids:
            index = self.index_of(uuid)
            counts[index] = counts.get(index, 0) + 1
        return counts


def memory_readings(document: Mapping[str, object] | None) -> Readings | None:
    """The memory keys of an overrides document, keyed by device index string."""
    return None if document is None else memory(document)


def activity_blocks(document: Mapping[str, object] | None) -> Activity:
    """The activity blocks of an overrides document, keyed by device index string."""
    return {
        index: {k[-1]: blocks[k[-1]] for k in ACTIVITY if k[-1] in blocks}
        for index, bucket in without(document, []).get("devices", {}).items()
        if isinstance(bucket, dict)
        and (blocks := bucket.get("dynamic_metrics") or {})
        and any(k[-1] in blocks for k in ACTIVITY)
    }


def process_lists(document: Mapping[str, object] | None) -> Processes:
    """The `processes` lists of an overrides document, keyed by device index string."""
    return processes(document)


def without_readings(
    document: Mapping[str, Any] | None, published: Iterable[str]
) -> dict[str, Any]:
    """The document less the keys allocwatch publishes for the devices `published`
    ("<index>"), and any map left empty by that, as its exit leaves it. Another
    device's are someone else's."""
    return without(document, MEMORY + PROCESSES + ACTIVITY, devices={str(i) for i in published})


def temperature_pin(celsius: int) -> dict[str, Any]:
    """A device's keys as `nvml-mock-ctl temp <celsius>` writes them: the static
    value, which marks the pin, and a zero-variance dynamic block, which shows it."""
    return {
        "thermal": {"temperature_gpu_c": celsius},
        "dynamic_metrics": {"temperature": {"base_c": celsius, "ramp_c": 0, "variance_c": 0}},
    }


def merged(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`patch` deep-merged into a copy of `base`, a null deleting its key (patch_overrides)."""
    out = copy.deepcopy(dict(base))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def engine_problems(document: object, mode: int) -> list[str]:
    """What the strict load lets through but would still be wrong (contract §3, §5).

    The reader parses with allocwatch's strict loader, which refuses what the
    engine refuses; left are the file's mode and the type of our two values.
    """
    problems = []
    if mode != FILE_MODE:
        problems.append(f"mode {mode:o}, not {FILE_MODE:o}")
    for index, block in (memory_readings(document) or {}).items():
        for key in (path[-1] for path in MEMORY):
            if key in block and type(block[key]) is not int:
                problems.append(f"devices.{index}.memory.{key} {block[key]!r} is not an int")
    return problems
