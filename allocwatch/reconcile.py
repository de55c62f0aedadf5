"""Claims → per-device memory readings. Pure: no I/O, no clock.

The arithmetic is upstream's, byte for byte (Go `uint64(float64(aperture) * f)`
truncates, so does Python's int() of a float; `round`, Decimal or integer
fractions would differ by a byte on some sizes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from allocwatch.claims import Claim, ClaimSource, physical_device_id
from allocwatch.profile import Device

# NVIDIA's DRA device names: a full GPU `gpu-<minor>`, a MIG device
# `gpu-<parentMinor>-mig-...`, which counts on its parent GPU. Anything else
# (`gpu-vfio-<index>`, another driver's naming) matches no device.
_DRA_GPU = re.compile(r"gpu-(0|[1-9][0-9]*)(?:-mig-.*)?", re.DOTALL)


class MemoryReading(NamedTuple):
    """A device's two published byte counts; a tuple, made for every device every poll."""

    used_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Reconciliation:
    readings: dict[int, MemoryReading]
    claims_per_device: dict[int, int]
    unknown_ids: tuple[str, ...] = field(default=())
    # The DRA share of claims_per_device; the rest came from device plugins.
    dra_claims_per_device: dict[int, int] = field(default_factory=dict)


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


def dra_number(device_name: str) -> int | None:
    """The N of `gpu-<N>` or `gpu-<N>-mig-...`; None for any other name."""
    match = _DRA_GPU.fullmatch(device_name)
    return int(match.group(1)) if match else None


def reconcile(
    devices: Sequence[Device], claims: Iterable[Claim], fraction: float
) -> Reconciliation:
    """Compute every device's reading from the whole current claim set.

    A device without memory in the profile has claims but no reading. Two
    devices that share a uuid both count its claims, as upstream counts
    claims per uuid and looks each device's uuid up; likewise two devices
    that share a DRA number (Device.dra_number). Device-plugin and DRA claims
    on one device add up.
    """
    per_uuid = {d.uuid: 0 for d in devices if d.uuid}
    per_number = {d.dra_number: 0 for d in devices}
    unknown: list[str] = []
    for claim in claims:
        if claim.source is ClaimSource.DRA:
            number = dra_number(claim.device_id)
            if number is not None and number in per_number:
                per_number[number] += 1
            else:
                unknown.append(f"{claim.resource_name}/{claim.device_id}")
            continue
        uuid = physical_device_id(claim.device_id)
        if uuid in per_uuid:
            per_uuid[uuid] += 1
        else:
            unknown.append(claim.device_id)
    dra = {d.index: per_number[d.dra_number] for d in devices}
    counts = {d.index: (per_uuid[d.uuid] if d.uuid else 0) + dra[d.index] for d in devices}
    return Reconciliation(
        readings={
            d.index: reading_for(d, counts[d.index], fraction) for d in devices if d.has_memory
        },
        claims_per_device=counts,
        unknown_ids=tuple(unknown),
        dra_claims_per_device=dra,
    )
