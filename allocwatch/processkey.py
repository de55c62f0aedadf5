"""Our `processes` key in the override document: merge, remove, check. Pure.

The engine replaces a profile device's process list with the document's
wholesale (`[]` clears it), so there is no sharing the key: while allocwatch
publishes processes it owns `devices["<i>"].processes` on every device it
publishes, and removes it where the device has no claims, which lets the
profile's own list show again. Maps are copied only on the way to a change,
as in `overrides`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from allocwatch.overrides import Document

PROCESSES_KEY = "processes"

ProcessLists = Mapping[int, Sequence[Mapping[str, Any]]]


def _device_buckets(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    devices = doc.get("devices")
    return devices if isinstance(devices, dict) else {}


def merge_processes(doc: Mapping[str, Any], processes: ProcessLists) -> Document:
    """Return a copy of `doc` with our `processes` list set per device (pure).

    Copies only the maps on the way, as merge_readings does.
    """
    out: Document = dict(doc)
    if not processes:
        return out
    if not isinstance(out.get("version"), int):
        out["version"] = 1
    devices = out["devices"] = dict(_device_buckets(out))
    for index, entries in processes.items():
        bucket = devices.get(str(index))
        bucket = devices[str(index)] = dict(bucket) if isinstance(bucket, dict) else {}
        bucket[PROCESSES_KEY] = [dict(entry) for entry in entries]
    return out


def remove_processes(doc: Mapping[str, Any], indices: Iterable[int]) -> Document:
    """Return a copy without the `processes` key of `indices`, pruning maps left empty."""
    out: Document = dict(doc)
    devices = dict(_device_buckets(out))
    changed = False
    for index in indices:
        bucket = devices.get(str(index))
        if isinstance(bucket, dict) and PROCESSES_KEY in bucket:
            bucket = {k: v for k, v in bucket.items() if k != PROCESSES_KEY}
            if bucket:
                devices[str(index)] = bucket
            else:
                del devices[str(index)]
            changed = True
    if changed:
        if devices:
            out["devices"] = devices
        else:
            del out["devices"]
    return out


def holds_processes(
    doc: Mapping[str, Any],
    processes: ProcessLists,
    absent: Iterable[int],
) -> bool:
    """True when `doc` already shows `processes` and no `processes` key for `absent`."""
    devices = _device_buckets(doc)
    if processes and not isinstance(doc.get("version"), int):
        return False
    for index, entries in processes.items():
        bucket = devices.get(str(index))
        current = bucket.get(PROCESSES_KEY) if isinstance(bucket, dict) else None
        if not isinstance(current, list) or len(current) != len(entries):
            return False
        for have, want in zip(current, entries, strict=True):
            # type-strict: a `1.0` or `true` someone wrote is not our int
            if not isinstance(have, dict) or have.keys() != want.keys():
                return False
            if any(type(have[k]) is not type(v) or have[k] != v for k, v in want.items()):
                return False
    for index in absent:
        bucket = devices.get(str(index))
        if isinstance(bucket, dict) and PROCESSES_KEY in bucket:
            return False
    return True
