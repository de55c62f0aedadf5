"""Our keys in the override document, described once. Pure.

allocwatch publishes a few surfaces on each device: its memory reading, its
NVML processes, and its utilization, power and temperature. Each is one entry
of SURFACES: the key it owns under `devices["<i>"]`, how a device's reading
fills it, and, for a surface a human can pin with nvml-mock-ctl, the key that
says they did. Setting, removing, checking that the document already shows
what we want, and yielding to a pin all run over that table, so a new
surface is one entry.

Ownership:
* On a device it publishes, allocwatch owns its surfaces' keys whole: it sets
  them, or removes them where it has nothing to say (processes on a device
  without claims, which lets the profile's own list show again). Every other
  key, and every other device, is kept as it is.
* Nothing in the document marks a key as ours (the engine refuses unknown
  keys), so ownership goes by place, and so survives a restart of ours.
* A pinned surface is the human's. `nvml-mock-ctl util|power|temp` write
  the surface's static value (`utilization`, `power.current_draw_mw`,
  `thermal.temperature_gpu_c`), which allocwatch never writes: that is the
  pin. On a device whose own entry holds it, allocwatch leaves the surface
  alone there; where only `all` holds it, allocwatch removes its key from the
  device, whose own entry would beat `all`, so the pin shows everywhere.
  `nvml-mock-ctl reset` removes the pin, and allocwatch takes the surface
  back at its next poll.

Maps are copied only on the way to a change: the rest is shared with the
document given, which nothing here modifies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from allocwatch.readings import DeviceReading

KeyPath = tuple[str, ...]
Document = dict[str, Any]


class _Marker:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# The value of a key we own and want gone.
ABSENT: Any = _Marker("ABSENT")
# A reading with nothing to say of a key: it stays as it is, not ours this time.
LEFT: Any = _Marker("LEFT")


@dataclass(frozen=True)
class Surface:
    key: KeyPath
    # The key's value for a reading; ABSENT to remove it, LEFT to leave it alone.
    read: Callable[[DeviceReading], Any]
    pin: KeyPath | None = None


def _activity(block: str) -> Callable[[DeviceReading], Any]:
    def read(r: DeviceReading) -> Any:
        if r.activity is None or block in r.activity.left:
            return LEFT
        return getattr(r.activity, block)  # None is YAML's null: the static value shows

    return read


# ints, which the engine reads exactly (byte counts stay below 2^53)
MEMORY_USED = Surface(("memory", "used_bytes"), lambda r: int(r.memory.used_bytes))
MEMORY_FREE = Surface(("memory", "free_bytes"), lambda r: int(r.memory.free_bytes))
# The engine replaces a profile device's list with the document's wholesale
# (`[]` clears it), so there is no sharing the key: it is ours whole.
PROCESSES = Surface(("processes",), lambda r: r.processes or ABSENT)
UTILIZATION = Surface(
    ("dynamic_metrics", "utilization"), _activity("utilization"), ("utilization",)
)
POWER = Surface(("dynamic_metrics", "power"), _activity("power"), ("power", "current_draw_mw"))
TEMPERATURE = Surface(
    ("dynamic_metrics", "temperature"), _activity("temperature"), ("thermal", "temperature_gpu_c")
)

MEMORY = (MEMORY_USED, MEMORY_FREE)
ACTIVITY = (UTILIZATION, POWER, TEMPERATURE)
SURFACES = (*MEMORY, PROCESSES, *ACTIVITY)

# Per device index, per key we own there now: the value wanted, or ABSENT.
Publication = Mapping[int, Mapping[KeyPath, Any]]
_SURFACE_OF = {surface.key: surface for surface in SURFACES}


def publication(
    readings: Mapping[int, DeviceReading], surfaces: Iterable[Surface]
) -> dict[int, dict[KeyPath, Any]]:
    """Our keys' values for each reading (a key LEFT alone is not ours this time)."""
    surfaces = tuple(surfaces)
    out: dict[int, dict[KeyPath, Any]] = {}
    for index, reading in readings.items():
        keys = out[index] = {}
        for surface in surfaces:
            value = surface.read(reading)
            if value is not LEFT:
                keys[surface.key] = value
    return out


def withdrawal(published: Publication, indices: Iterable[int]) -> dict[int, dict[KeyPath, Any]]:
    """Every key `published` owns on `indices`, to be removed: only what is ours now."""
    return {
        index: dict.fromkeys(published[index], ABSENT) for index in indices if index in published
    }


def _get(node: Any, path: KeyPath) -> Any:
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return ABSENT
        node = node[key]
    return node


def _devices(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    devices = doc.get("devices")
    return devices if isinstance(devices, dict) else {}


def _effective(
    doc: Mapping[str, Any], index: int, keys: Mapping[KeyPath, Any]
) -> Iterator[tuple[KeyPath, Any]]:
    """`keys` as they apply to device `index` of `doc`, once its pins are respected."""
    bucket = _devices(doc).get(str(index))
    for key, value in keys.items():
        pin = _SURFACE_OF[key].pin
        if pin is not None:
            if _get(bucket, pin) is not ABSENT:
                continue  # the device's own pin: theirs, left alone
            if _get(doc.get("all"), pin) is not ABSENT:
                value = ABSENT  # pinned for all: ours would hide it on this device
        yield key, value


def same(a: Any, b: Any) -> bool:
    """Equality that demands equal types too: 1, 1.0, True and "1" all differ."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def holds(doc: Mapping[str, Any], wanted: Publication) -> bool:
    """True when `doc` already shows `wanted`: apply() would change nothing.

    The cheap check behind write-only-on-change, without copying anything.
    Type-strict: a `1.0` or `true` someone wrote is not our int.
    """
    devices = _devices(doc)
    setting = False
    for index, keys in wanted.items():
        bucket = devices.get(str(index))
        for key, value in _effective(doc, index, keys):
            current = _get(bucket, key)
            if value is ABSENT:
                if current is not ABSENT:
                    return False
            elif not same(current, value):
                return False
            else:
                setting = True
    return not setting or isinstance(doc.get("version"), int)


def _with(node: Mapping[str, Any], path: KeyPath, value: Any) -> dict[str, Any]:
    """A copy of `node` with `path` set; maps missing, null or not maps on the way become maps."""
    out = dict(node)
    head = path[0]
    if len(path) == 1:
        out[head] = value
    else:
        child = out.get(head)
        out[head] = _with(child if isinstance(child, dict) else {}, path[1:], value)
    return out


def _without(node: Mapping[str, Any], path: KeyPath) -> dict[str, Any] | None:
    """A copy of `node` without `path`, pruning maps left empty; None when it has no such key."""
    head = path[0]
    if head not in node:
        return None
    if len(path) == 1:
        return {k: v for k, v in node.items() if k != head}
    child = node[head]
    if not isinstance(child, dict):
        return None
    rest = _without(child, path[1:])
    if rest is None:
        return None
    out = dict(node)
    if rest:
        out[head] = rest
    else:
        del out[head]
    return out


def apply(doc: Mapping[str, Any], wanted: Publication) -> Document:
    """A copy of `doc` showing `wanted`, pins respected; every key not ours is kept."""
    out: Document = dict(doc)
    devices = dict(_devices(doc))
    touched = setting = False
    for index, keys in wanted.items():
        name = str(index)
        before = devices.get(name)
        bucket: dict[str, Any] | None = before if isinstance(before, dict) else None
        for key, value in _effective(doc, index, keys):
            if value is ABSENT:
                removed = None if bucket is None else _without(bucket, key)
                if removed is not None:
                    bucket = removed
            else:
                bucket = _with(bucket or {}, key, value)
                setting = True
        if bucket is None or bucket is before:
            continue
        touched = True
        if bucket:
            devices[name] = bucket
        else:
            devices.pop(name, None)
    if touched:
        if devices:
            out["devices"] = devices
        else:
            out.pop("devices", None)
    if setting and not isinstance(out.get("version"), int):
        out["version"] = 1  # what Go writers emit
    return out


def process_pids(doc: Mapping[str, Any] | None) -> dict[tuple[int, str], int]:
    """The pid of each (device index, process name) our key shows in `doc`.

    What a watcher started anew reads back, so a claim whose entry is still
    there keeps its pid across the restart.
    """
    out: dict[tuple[int, str], int] = {}
    for name, bucket in _devices(doc or {}).items():
        entries = bucket.get(PROCESSES.key[0]) if isinstance(bucket, dict) else None
        if not (isinstance(entries, list) and str(name).isdigit()):
            continue
        for entry in entries:
            fields = entry if isinstance(entry, dict) else {}
            pid, process = fields.get("pid"), fields.get("name")
            if type(pid) is int and isinstance(process, str):
                out[(int(name), process)] = pid
    return out
