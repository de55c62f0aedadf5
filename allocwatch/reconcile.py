"""Claims → the devices that hold them, and each device's memory reading. Pure: no I/O, no clock.

The arithmetic is upstream's, byte for byte (Go `uint64(float64(aperture) * f)`
truncates, so does Python's int() of a float; `round`, Decimal or integer
fractions would differ by a byte on some sizes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from allocwatch.claims import Claim, ClaimSource, physical_device_id
from allocwatch.declaredload import DeclaredLoad
from allocwatch.profile import Device

# NVIDIA's DRA device names: a full GPU `gpu-<minor>`, a MIG device
# `gpu-<parentMinor>-mig-...`, which counts on its parent GPU. A minor number
# is an int64, so at most 19 digits. Anything else (`gpu-vfio-<index>`,
# another driver's naming) matches no device by number.
_DRA_GPU = re.compile(r"gpu-(0|[1-9][0-9]{0,18})(?:-mig-.*)?", re.DOTALL)
# A DRA device name is a DNS label; a longer one is counted as unknown unread.
MAX_DRA_NAME = 253


class MemoryReading(NamedTuple):
    """A device's two published byte counts; a tuple, made for every device every poll."""

    used_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Reconciliation:
    """Where the claims landed, and the memory reading of each device that has memory."""

    readings: dict[int, MemoryReading]
    # Every claim of the List, in its order, with the indices of the devices
    # it counts on: none for an unknown id, several only when devices share
    # its uuid or DRA number.
    placed: list[tuple[Claim, tuple[int, ...]]]
    # Every profile device's index -> the claims counted on it, in List order.
    claims_on: dict[int, list[Claim]]
    unknown_ids: tuple[str, ...] = field(default=())
    # Each device with a reading -> the bytes each of its claims asks for.
    asked: dict[int, dict[Claim, int]] = field(default_factory=dict)

    @property
    def claims_per_device(self) -> dict[int, int]:
        return {index: len(claims) for index, claims in self.claims_on.items()}

    @property
    def dra_claims_per_device(self) -> dict[int, int]:
        """The DRA share of claims_per_device; the rest came from device plugins."""
        return {
            index: sum(c.source is ClaimSource.DRA for c in claims)
            for index, claims in self.claims_on.items()
        }


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


def asks(room: int, fraction: float, load: DeclaredLoad | None) -> int:
    """The bytes one claim of a pod that declared `load` asks for, of `room` usable."""
    if load is not None and load.memory_bytes is not None:
        return load.memory_bytes
    if load is not None and load.memory_fraction is not None:
        fraction = load.memory_fraction
    return int(float(room) * fraction)


def dra_number(device_name: str) -> int | None:
    """The N of `gpu-<N>` or `gpu-<N>-mig-...`; None for any other name."""
    if len(device_name) > MAX_DRA_NAME:
        return None
    match = _DRA_GPU.fullmatch(device_name)
    return int(match.group(1)) if match else None


def reconcile(
    devices: Sequence[Device],
    claims: Iterable[Claim],
    fraction: float,
    loads: Mapping[tuple[str, str], DeclaredLoad] | None = None,
) -> Reconciliation:
    """Place every claim of the whole current set, and compute every device's reading.

    A device without memory in the profile has claims but no reading. Two
    devices that share a uuid both count its claims, as upstream counts
    claims per uuid and looks each device's uuid up; likewise two devices
    that share a DRA number (Device.dra_number). A DRA device named by its
    GPU's uuid, in either case (as fake-gpu-operator's DRA plugin names
    them), counts on that GPU. Device-plugin and DRA claims on one device
    add up.
    """
    by_uuid: dict[str, tuple[int, ...]] = {}
    by_number: dict[int, tuple[int, ...]] = {}
    by_folded_uuid: dict[str, tuple[int, ...]] = {}
    for device in devices:
        if device.uuid:
            by_uuid[device.uuid] = (*by_uuid.get(device.uuid, ()), device.index)
            folded = device.uuid.lower()
            by_folded_uuid[folded] = (*by_folded_uuid.get(folded, ()), device.index)
        by_number[device.dra_number] = (*by_number.get(device.dra_number, ()), device.index)
    claims_on: dict[int, list[Claim]] = {device.index: [] for device in devices}
    placed: list[tuple[Claim, tuple[int, ...]]] = []
    unknown: list[str] = []
    for claim in claims:
        if claim.source is ClaimSource.DRA:
            number = dra_number(claim.device_id)
            if number is not None:
                where = by_number.get(number, ())
            elif len(claim.device_id) <= MAX_DRA_NAME:
                where = by_folded_uuid.get(claim.device_id.lower(), ())
            else:
                where = ()
            name = f"{claim.resource_name}/{claim.device_id}"
        else:
            where = by_uuid.get(physical_device_id(claim.device_id), ())
            name = claim.device_id
        placed.append((claim, where))
        if not where:
            unknown.append(name)
        for index in where:
            claims_on[index].append(claim)
    readings: dict[int, MemoryReading] = {}
    asked: dict[int, dict[Claim, int]] = {}
    for device in devices:
        if not device.has_memory:
            continue
        on = claims_on[device.index]
        room = aperture(device)
        want = {c: asks(room, fraction, (loads or {}).get((c.namespace, c.pod))) for c in on}
        asked[device.index] = want
        if all(want[c] == int(float(room) * fraction) for c in on):
            readings[device.index] = reading_for(device, len(on), fraction)  # upstream's
        else:
            used = min(sum(want[c] for c in on), room)
            readings[device.index] = MemoryReading(used, room - used)
    return Reconciliation(readings, placed, claims_on, tuple(unknown), asked)
