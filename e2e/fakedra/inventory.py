"""The GPUs the plugin publishes, from an nvml-mock profile; no I/O beyond reading it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from allocwatch.profile import Device, ProfileError
from allocwatch.profilesource import load_devices


@dataclass(frozen=True)
class DraDevice:
    name: str
    uuid: str
    minor: int
    index: int


def minor_numbers(profile: Any) -> dict[int, int]:
    """`index -> minor_number` for the profile devices that give one."""
    devices = profile.get("devices") if isinstance(profile, Mapping) else None
    minors: dict[int, int] = {}
    for entry in devices if isinstance(devices, list) else []:
        if not isinstance(entry, Mapping):
            continue
        index, minor = entry.get("index"), entry.get("minor_number")
        if isinstance(index, int) and isinstance(minor, int) and not isinstance(minor, bool):
            minors[index] = minor
    return minors


def build_inventory(devices: Sequence[Device], minors: Mapping[int, int]) -> list[DraDevice]:
    """One `gpu-<minor>` per profile GPU (the index stands in for a missing minor),
    in minor order, as NVIDIA's driver names full GPUs."""
    inventory = []
    for device in devices:
        if not device.uuid:
            continue
        minor = minors.get(device.index, device.index)
        inventory.append(DraDevice(f"gpu-{minor}", device.uuid, minor, device.index))
    if not inventory:
        raise ValueError("the profile names no GPU UUIDs")
    names = [d.name for d in inventory]
    if len(set(names)) != len(names):
        raise ValueError(f"the profile's minor numbers are not unique: {sorted(names)}")
    return sorted(inventory, key=lambda d: d.minor)


def load_inventory(path: str | os.PathLike[str]) -> list[DraDevice]:
    """Raises OSError, ProfileError or ValueError."""
    devices = load_devices(path)
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(str(exc)) from exc
    return build_inventory(devices, minor_numbers(raw))
