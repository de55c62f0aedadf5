"""The nvml-mock profile (`config.yaml`): which devices exist and their memory.

The rules mirror the upstream engine (`GetDeviceConfig`/`DevicesFromConfig`),
so every index we compute is the index the engine serves:

* N = len(devices); 0 means 8; `system.num_devices > 0` overrides it.
* The UUID of index i is that of the first `devices[]` entry with `index == i`.
* A per-device `memory:` block replaces `device_defaults.memory` wholesale.
* Field names match case-insensitively and unknown keys are ignored.
* Scalars are go-yaml v2's (see goyaml), and numbers reach Go's integer fields
  through JSON: an integral float such as `42949672960.0` is that integer, and
  a missing `index` is 0.

Devices without any memory block get no reading: upstream would publish 0/0
and make the node report a total of 0, while no override keeps the base values.
Claims on them still count as claims on a known device.
The engine serves at most 8 devices, so higher indices are never published.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from allocwatch import goyaml

log = logging.getLogger(__name__)

DEFAULT_NUM_DEVICES = 8
ENGINE_MAX_DEVICES = 8


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


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    """Case-insensitive lookup, like Go's encoding/json field matching."""
    if key in mapping:
        return mapping[key]
    lowered = key.lower()
    for k, v in mapping.items():
        if isinstance(k, str) and k.lower() == lowered:
            return v
    return None


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProfileError(f"{where} must be a mapping, not {type(value).__name__}")
    return value


def _integer(value: Any) -> int | None:
    """An int as Go's JSON decoding takes it into an integer field, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _int(value: Any, where: str) -> int:
    """A Go `int` field: null or missing is 0."""
    number = 0 if value is None else _integer(value)
    if number is None or not goyaml.is_int64(number):
        raise ProfileError(f"{where} must be an integer, not {value!r}")
    return number


def _uint(value: Any, where: str) -> int:
    """A Go `uint64` field: null or missing is 0."""
    number = 0 if value is None else _integer(value)
    if number is None or not 0 <= number < 2**64:
        raise ProfileError(f"{where} must be a non-negative integer, not {value!r}")
    return number


def _memory(block: Any, where: str) -> tuple[int, int] | None:
    if block is None:
        return None
    mem = _mapping(block, where)
    return (
        _uint(_get(mem, "total_bytes"), f"{where}.total_bytes"),
        _uint(_get(mem, "reserved_bytes"), f"{where}.reserved_bytes"),
    )


def parse_profile(text: str) -> list[Device]:
    """Parse profile YAML into the devices the engine serves (pure)."""
    try:
        doc = goyaml.load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"not valid YAML: {exc}") from exc
    root = _mapping(doc, "the profile")
    version = _get(root, "version")
    if version in (None, ""):
        raise ProfileError("`version` is required")
    system = _mapping(_get(root, "system"), "system")
    if _get(system, "driver_version") in (None, ""):
        raise ProfileError("`system.driver_version` is required")

    entries = _get(root, "devices")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ProfileError("`devices` must be a list")
    by_index: dict[int, Mapping[str, Any]] = {}
    for pos, raw in enumerate(entries):
        entry = _mapping(raw, f"devices[{pos}]")
        index = _int(_get(entry, "index"), f"devices[{pos}].index")
        if index in by_index:
            raise ProfileError(f"devices[{pos}].index {index} is not unique")
        by_index[index] = entry

    count = len(entries) or DEFAULT_NUM_DEVICES
    num_devices = _int(_get(system, "num_devices"), "system.num_devices")
    if num_devices > 0:
        count = num_devices

    defaults = _mapping(_get(root, "device_defaults"), "device_defaults")
    default_memory = _memory(_get(defaults, "memory"), "device_defaults.memory")

    devices = []
    for i in range(min(count, ENGINE_MAX_DEVICES)):
        entry = by_index.get(i, {})
        uuid = _get(entry, "uuid")
        if uuid is not None and not isinstance(uuid, str):
            raise ProfileError(f"device {i}: uuid must be a string, not {uuid!r}")
        memory = _memory(_get(entry, "memory"), f"device {i}.memory") or default_memory
        if memory is None:
            devices.append(Device(i, uuid or "", 0, 0, has_memory=False))
        else:
            devices.append(Device(i, uuid or "", memory[0], memory[1]))
    return devices


def load_devices(path: str | os.PathLike[str]) -> list[Device]:
    """Read and parse a profile file. Raises OSError or ProfileError."""
    return parse_profile(Path(path).read_text(encoding="utf-8"))


class ProfileSource:
    """Keeps the devices of a profile file current across polls.

    The file is re-read only when its inode, mtime or size changes. A missing
    file yields None (publish nothing); a malformed one keeps the last good
    devices, logs each distinct problem once, and recovers when fixed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.devices: list[Device] | None = None
        self.error: str | None = None
        self._identity: tuple[int, int, int, int] | None = None

    def refresh(self) -> list[Device] | None:
        """The current devices, or None when there are none to publish for.

        Each problem is logged here, once, naming the file; `error` holds it.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._missing()
        except OSError as exc:  # e.g. a parent that is not a directory
            self._identity = None
            return self._unusable(f"profile {self.path}: {exc.strerror or exc}")
        identity = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if identity == self._identity:
            return self.devices
        self._identity = identity
        try:
            devices = load_devices(self.path)
        except FileNotFoundError:  # removed since the stat
            return self._missing()
        except OSError as exc:
            # Try again next poll: fixing permissions changes neither mtime nor size.
            self._identity = None
            return self._unusable(f"profile {self.path}: {exc}")
        except (UnicodeDecodeError, ProfileError) as exc:
            return self._unusable(f"profile {self.path}: {exc}")
        if devices != self.devices:
            log.info(
                "profile %s: %d devices (%s)",
                self.path,
                len(devices),
                ", ".join(
                    f"{d.index}={d.uuid or '<no uuid>'}{'' if d.has_memory else ' (no memory)'}"
                    for d in devices
                ),
            )
        self.devices = devices
        self.error = None
        return devices

    def _missing(self) -> None:
        error = f"profile {self.path} is missing"
        if error != self.error:
            log.warning("%s; publishing nothing until it appears", error)
        self.devices = None
        self._identity = None
        self.error = error
        return None

    def _unusable(self, error: str) -> list[Device] | None:
        """Keep the last good devices, if any, and log a new problem once."""
        if error != self.error:
            if self.devices is None:
                log.error("%s; not publishing until it is fixed", error)
            else:
                log.error("%s; keeping the last good devices", error)
        self.error = error
        return self.devices
