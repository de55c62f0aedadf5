"""The nvml-mock profile (`config.yaml`): which devices exist and their memory. Pure.

The rules mirror the upstream engine (`GetDeviceConfig`/`DevicesFromConfig`),
so every index we compute is the index the engine serves:

* N = len(devices); 0 means 8; `system.num_devices > 0` overrides it.
* The UUID of index i is that of the first `devices[]` entry with `index == i`.
* A per-device `memory:` block replaces `device_defaults.memory` wholesale.
* Field names match case-insensitively and unknown keys are ignored. A field
  named twice (`memory:` and `Memory:`) is refused: Go would layer the two.
* Scalars are go-yaml v2's (see goyaml), and numbers reach Go's integer fields
  through JSON: an integral float such as `42949672960.0` is that integer, and
  a missing `index` is 0. An int or bool in a string field is its text; a
  float there is refused.
* A wrong type in any field we know (version, driver_version, num_devices, and
  on every devices[] entry index, uuid, minor_number and the five memory
  fields) makes the engine refuse the whole profile, so it is refused here too.

Minor numbers follow the engine too: an entry's `minor_number`, 0 for an
entry without one, and the index for an index no entry lists. NVIDIA's DRA
driver names a GPU `gpu-<minor>`, so that is the name it matches. A profile
that gives no minor number at all (the engine then reports 0 for every listed
device) matches `gpu-<index>`, as the driver's releases before mid-2025 named
GPUs; Device.minor_number is None then.

Devices without any memory block get no reading: upstream would publish 0/0
and make the node report a total of 0, while no override keeps the base values.
Claims on them still count as claims on a known device.
The engine serves at most 8 devices, so higher indices are never published.

A device's `power` and `thermal` blocks (its own, else device_defaults',
wholesale as memory's) give its idle draw and temperature, and how far they
may rise: `activity` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import yaml

from allocwatch import goscalars as go
from allocwatch import goyaml

DEFAULT_NUM_DEVICES = 8
ENGINE_MAX_DEVICES = 8
# The engine reads the byte counts we publish as float64, exact only up to 2^53.
MAX_EXACT_BYTES = 2**53


class ProfileError(ValueError):
    """The profile cannot be used; the message says why."""


class Power(NamedTuple):
    """A device's power block, in mW; 0 where the profile gives no value."""

    idle: int  # current_draw_mw
    limit: int  # enforced_limit_mw, else default_limit_mw, else max_limit_mw
    minimum: int  # min_limit_mw: the engine clamps a dynamic reading to it
    maximum: int  # max_limit_mw, likewise


class Thermal(NamedTuple):
    """A device's thermal block, in °C; 0 where the profile gives no value."""

    idle: int  # temperature_gpu_c
    target: int  # target_temperature_c
    slowdown: int  # slowdown_threshold_c
    shutdown: int  # shutdown_threshold_c


@dataclass(frozen=True)
class Device:
    index: int
    uuid: str
    total_bytes: int
    reserved_bytes: int
    # False when neither the device's entry nor device_defaults has a memory block.
    has_memory: bool = True
    # The minor number the engine reports, or None when the profile gives none.
    minor_number: int | None = None
    power: Power | None = None  # None: no power block
    thermal: Thermal | None = None  # None: no thermal block

    @property
    def dra_number(self) -> int:
        """The N of the DRA device `gpu-<N>`: the minor number, else the index."""
        return self.index if self.minor_number is None else self.minor_number


# MemoryConfig's fields: each one must decode, or the engine refuses the profile.
MEMORY_FIELDS = {
    "total_bytes": go.unsigned(64),
    "reserved_bytes": go.unsigned(64),
    "free_bytes": go.unsigned(64),
    "used_bytes": go.unsigned(64),
    "memory_bus_width": go.unsigned(32),
}
# PowerConfig's and ThermalConfig's fields that allocwatch reads; the engine
# refuses the profile for a wrong type in these too.
POWER_FIELDS = dict.fromkeys(
    ("current_draw_mw", "enforced_limit_mw", "default_limit_mw", "min_limit_mw", "max_limit_mw"),
    go.unsigned(32),
)
THERMAL_FIELDS = dict.fromkeys(
    ("temperature_gpu_c", "target_temperature_c", "slowdown_threshold_c", "shutdown_threshold_c"),
    go.int_field,
)


def _memory(block: Mapping[str, Any] | None, where: str) -> tuple[int, int] | None:
    memory = go.fields(block, MEMORY_FIELDS, where)
    return None if memory is None else (memory["total_bytes"], memory["reserved_bytes"])


def _blocks(entry: Mapping[str, Any], where: str) -> tuple[Power | None, Thermal | None]:
    """An entry's (or device_defaults') power and thermal blocks."""
    power = go.fields(go.pointer(entry, "power", f"{where}.power"), POWER_FIELDS, f"{where}.power")
    thermal = go.fields(
        go.pointer(entry, "thermal", f"{where}.thermal"), THERMAL_FIELDS, f"{where}.thermal"
    )
    limit = power and (
        power["enforced_limit_mw"] or power["default_limit_mw"] or power["max_limit_mw"]
    )
    return (
        None
        if power is None
        else Power(power["current_draw_mw"], limit, power["min_limit_mw"], power["max_limit_mw"]),
        None if thermal is None else Thermal(*thermal.values()),
    )


def parse_profile(text: str) -> list[Device]:
    """Parse profile YAML into the devices the engine serves (pure).

    Refuses what the engine cannot load: a wrong type in any field we know,
    on any device entry, fails the engine's whole profile.
    """
    try:
        doc = goyaml.load(text)
    except goyaml.TooManyNodes as exc:
        raise ProfileError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"not valid YAML: {exc}") from exc
    try:
        return _devices(doc)
    except go.FieldError as exc:
        raise ProfileError(str(exc)) from None


def _devices(doc: Any) -> list[Device]:
    root = go.mapping(doc, "the profile")
    if not go.scalar(root, "version", "version", go.text):
        raise ProfileError("`version` is required")
    system = go.struct(root, "system", "system")
    if not go.scalar(system, "driver_version", "system.driver_version", go.text):
        raise ProfileError("`system.driver_version` is required")

    entries = go.field(root, "devices", "devices")
    if entries is not None and not isinstance(entries, list):
        raise ProfileError("`devices` must be a list")
    entries = entries or []
    by_index: dict[int, tuple[str, tuple[int, int] | None, str]] = {}
    blocks: dict[int, tuple[Power | None, Thermal | None]] = {}
    minors: dict[int, int | None] = {}
    for pos, raw in enumerate(entries):
        entry = go.mapping(raw, f"devices[{pos}]")
        index = go.scalar(entry, "index", f"devices[{pos}].index", go.int_field) or 0
        if index in by_index:
            raise ProfileError(f"devices[{pos}].index {index} is not unique")
        uuid = go.scalar(entry, "uuid", f"devices[{pos}].uuid", go.text) or ""
        where = f"devices[{pos}].memory"
        memory = _memory(go.pointer(entry, "memory", where), where)
        by_index[index] = (uuid, memory, where)
        blocks[index] = _blocks(entry, f"devices[{pos}]")
        where = f"devices[{pos}].minor_number"
        minors[index] = go.scalar(entry, "minor_number", where, go.int_field)

    count = len(entries) or DEFAULT_NUM_DEVICES
    num_devices = go.scalar(system, "num_devices", "system.num_devices", go.int_field) or 0
    if num_devices > 0:
        count = num_devices

    defaults = go.struct(root, "device_defaults", "device_defaults")
    where = "device_defaults.memory"
    default_memory = _memory(go.pointer(defaults, "memory", where), where)
    default_power, default_thermal = _blocks(defaults, "device_defaults")

    gives_minors = any(minor is not None for minor in minors.values())
    devices = []
    for i in range(min(count, ENGINE_MAX_DEVICES)):
        uuid, memory, where = by_index.get(i, ("", None, ""))
        minor = None
        if gives_minors:
            minor = (minors[i] or 0) if i in minors else i
        power, thermal = blocks.get(i, (None, None))
        power, thermal = power or default_power, thermal or default_thermal
        if memory is None:
            memory, where = default_memory, "device_defaults.memory"
        total, reserved = memory or (0, 0)
        if total - reserved > MAX_EXACT_BYTES:
            raise ProfileError(
                f"device {i}: {where} leaves {total - reserved} bytes usable, more than "
                "2^53; the engine reads published byte counts as float64, which cannot "
                "hold that exactly"
            )
        devices.append(Device(i, uuid, total, reserved, memory is not None, minor, power, thermal))
    return devices
