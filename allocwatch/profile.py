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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from allocwatch import goscalars, goyaml

DEFAULT_NUM_DEVICES = 8
ENGINE_MAX_DEVICES = 8
# The engine reads the byte counts we publish as float64, exact only up to 2^53.
MAX_EXACT_BYTES = 2**53


class ProfileError(ValueError):
    """The profile cannot be used; the message says why."""


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

    @property
    def dra_number(self) -> int:
        """The N of the DRA device `gpu-<N>`: the minor number, else the index."""
        return self.index if self.minor_number is None else self.minor_number


def _value(fields: Mapping[str, Any], name: str, where: str) -> Any:
    """The value of field `name`, whose key matches case-insensitively, as Go's does.

    A field named twice (`memory:` and `Memory:`) Go decodes twice, layering
    the two; allocwatch refuses it rather than model that layering.
    """
    lowered = name.lower()
    keys = sorted(k for k in fields if isinstance(k, str) and k.lower() == lowered)
    if len(keys) > 1:
        raise ProfileError(
            f"{where} is named twice ({', '.join(keys)}); allocwatch reads each field once"
        )
    return fields[keys[0]] if keys else None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProfileError(f"{where} must be a mapping, not {type(value).__name__}")
    return value


def _struct(fields: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    return _mapping(_value(fields, name, where), where)


def _pointer(fields: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any] | None:
    """A pointer-to-struct field (`memory`): absent or null is nil."""
    value = _value(fields, name, where)
    return None if value is None else _mapping(value, where)


def _scalar(
    fields: Mapping[str, Any], name: str, where: str, convert: Callable[[Any, str], Any]
) -> Any:
    """A scalar field: it must decode; absent or null is None."""
    value = _value(fields, name, where)
    return None if value is None else convert(value, where)


def _int(value: Any, where: str) -> int:
    """A Go `int` field."""
    number = goscalars.json_int(value)
    if number is None or not goscalars.is_int64(number):
        raise ProfileError(f"{where} must be an integer, not {value!r}")
    return number


def _unsigned(bits: int) -> Callable[[Any, str], int]:
    def convert(value: Any, where: str) -> int:
        number = goscalars.json_int(value)
        if number is None or not 0 <= number < 2**bits:
            raise ProfileError(f"{where} must be a non-negative integer, not {value!r}")
        return number

    return convert


def _text(value: Any, where: str) -> str:
    """A Go `string` field: sigs.k8s.io/yaml turns an int or bool into its text.

    It would format a float (as a float32) or `!!binary` bytes too; allocwatch
    refuses those, since a uuid written as a number is a mistake.
    """
    text = goscalars.go_text(value)
    if text is None:
        kind = "a number" if isinstance(value, float) else f"a {type(value).__name__}"
        raise ProfileError(f"{where} must be text, not {kind}; quote it")
    return text


# MemoryConfig's fields: each one must decode, or the engine refuses the profile.
MEMORY_FIELDS = {
    "total_bytes": _unsigned(64),
    "reserved_bytes": _unsigned(64),
    "free_bytes": _unsigned(64),
    "used_bytes": _unsigned(64),
    "memory_bus_width": _unsigned(32),
}


def _memory(block: Mapping[str, Any] | None, where: str) -> tuple[int, int] | None:
    if block is None:
        return None
    fields = {
        name: _scalar(block, name, f"{where}.{name}", convert) or 0
        for name, convert in MEMORY_FIELDS.items()
    }
    return fields["total_bytes"], fields["reserved_bytes"]


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
    root = _mapping(doc, "the profile")
    if not _scalar(root, "version", "version", _text):
        raise ProfileError("`version` is required")
    system = _struct(root, "system", "system")
    if not _scalar(system, "driver_version", "system.driver_version", _text):
        raise ProfileError("`system.driver_version` is required")

    entries = _value(root, "devices", "devices")
    if entries is not None and not isinstance(entries, list):
        raise ProfileError("`devices` must be a list")
    entries = entries or []
    by_index: dict[int, tuple[str, tuple[int, int] | None, str]] = {}
    minors: dict[int, int | None] = {}
    for pos, raw in enumerate(entries):
        entry = _mapping(raw, f"devices[{pos}]")
        index = _scalar(entry, "index", f"devices[{pos}].index", _int) or 0
        if index in by_index:
            raise ProfileError(f"devices[{pos}].index {index} is not unique")
        uuid = _scalar(entry, "uuid", f"devices[{pos}].uuid", _text) or ""
        where = f"devices[{pos}].memory"
        memory = _memory(_pointer(entry, "memory", where), where)
        by_index[index] = (uuid, memory, where)
        minors[index] = _scalar(entry, "minor_number", f"devices[{pos}].minor_number", _int)

    count = len(entries) or DEFAULT_NUM_DEVICES
    num_devices = _scalar(system, "num_devices", "system.num_devices", _int) or 0
    if num_devices > 0:
        count = num_devices

    defaults = _struct(root, "device_defaults", "device_defaults")
    where = "device_defaults.memory"
    default_memory = _memory(_pointer(defaults, "memory", where), where)

    gives_minors = any(minor is not None for minor in minors.values())
    devices = []
    for i in range(min(count, ENGINE_MAX_DEVICES)):
        uuid, memory, where = by_index.get(i, ("", None, ""))
        minor = None
        if gives_minors:
            minor = (minors[i] or 0) if i in minors else i
        if memory is None:
            memory, where = default_memory, "device_defaults.memory"
        if memory is None:
            devices.append(Device(i, uuid, 0, 0, has_memory=False, minor_number=minor))
            continue
        total, reserved = memory
        if total - reserved > MAX_EXACT_BYTES:
            raise ProfileError(
                f"device {i}: {where} leaves {total - reserved} bytes usable, more than "
                "2^53; the engine reads published byte counts as float64, which cannot "
                "hold that exactly"
            )
        devices.append(Device(i, uuid, total, reserved, minor_number=minor))
    return devices
