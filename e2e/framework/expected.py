"""The readings allocwatch must publish, computed independently from the profile.

Per nvml-mock's contract: aperture = total - reserved (0 if negative),
per = int(float(aperture) * fraction), used = min(per * claims, aperture),
free = aperture - used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from allocwatch.profile import Device

Readings = dict[str, dict[str, int]]


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

    def claims_for(self, uuids: Sequence[str]) -> dict[int, int]:
        counts: dict[int, int] = {}
        for uuid in uuids:
            index = self.index_of(uuid)
            counts[index] = counts.get(index, 0) + 1
        return counts


def memory_readings(document: Mapping[str, object] | None) -> Readings | None:
    """The memory blocks of an overrides document, keyed by device index string."""
    if document is None:
        return None
    devices = document.get("devices") or {}
    if not isinstance(devices, Mapping):
        return None
    out: Readings = {}
    for key, bucket in devices.items():
        if isinstance(bucket, Mapping) and isinstance(bucket.get("memory"), Mapping):
            out[str(key)] = dict(bucket["memory"])
    return out


def engine_problems(document: object, mode: int) -> list[str]:
    """What would make nvml-mock refuse or misread the document (contract §3, §5)."""
    problems = []
    if mode != 0o644:
        problems.append(f"mode {mode:o}, not 644")
    if document is None:
        return problems
    if not isinstance(document, Mapping):
        return [*problems, f"not a mapping: {document!r}"]
    unknown = set(document) - {"version", "all", "devices"}
    if unknown:
        problems.append(f"unknown top-level keys {sorted(map(str, unknown))}")
    version = document.get("version")
    if version is not None and type(version) is not int:
        problems.append(f"version {version!r} is not an int")
    for index, memory in (memory_readings(document) or {}).items():
        for key, value in memory.items():
            if key in ("used_bytes", "free_bytes") and type(value) is not int:
                problems.append(f"devices.{index}.memory.{key} {value!r} is not an int")
    return problems
