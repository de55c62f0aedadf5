"""Claims → per-device memory readings. Pure: no I/O, no clock.

The arithmetic is upstream's, byte for byte (Go `uint64(float64(aperture) * f)`
truncates, so does Python's int() of a float; `round`, Decimal or integer
fractions would differ by a byte on some sizes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from allocwatch.claims import Claim, physical_device_id
from allocwatch.profile import Device


class MemoryReading(NamedTuple):
    """A device's two published byte counts; a tuple, made for every device every poll."""

    used_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Reconciliation:
    readings: dict[int, MemoryReading]
    claims_per_device: dict[int, int]
    unknown_ids: tuple[str, ...] = field(default=())


def aperture(device: Device) -> int:
    """Usable memory: total - reserved, or 0 when reserved exceeds total."""
    if device.reserved_bytes > device.total_bytes:
        return 0
    return device.total_bytes - device.reserved_bytes


def reading_for(device: Device, claims: int, fraction: float) -> MemoryReading:
    room = aperture(device)
    per_claim = int(float(room) * fraction)
    used = min(per_claim * claims, room)
    return MemoryReading(used, room - used)


def reconcile(
    devices: Sequence[Device], claims: Iterable[Claim], fraction: float
) -> Reconciliation:
    """Compute every device's reading from the whole current claim set.

    A device without memory in the profile has claims but no reading. Two
    devices that share a uuid both count its claims, as upstream counts
    claims per uuid and looks each device's uuid up.
    """
    per_uuid = {d.uuid: 0 for d in devices if d.uuid}
    unknown: list[str] = []
    for claim in claims:
        uuid = physical_device_id(claim.device_id)
        if uuid in per_uuid:
            per_uuid[uuid] += 1
        else:
            unknown.append(claim.device_id)
    counts = {d.index: per_uuid[d.uuid] if d.uuid else 0 for d in devices}
    return Reconciliation(
        readings={
            d.index: reading_for(d, counts[d.index], fraction) for d in devices if d.has_memory
        },
        claims_per_device=counts,
        unknown_ids=tuple(unknown),
    )
