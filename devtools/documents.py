"""The parts of an override document the checks read, picked with their own few lines.

Deliberately not the product's code: an oracle that shared the code under
test could not catch its bugs. Documents are read with PyYAML's safe loader,
as any YAML consumer would; what the engine makes of odd scalars is the
product's tests' business.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

KeyPath = tuple[str, ...]
MEMORY: tuple[KeyPath, ...] = (("memory", "used_bytes"), ("memory", "free_bytes"))
PROCESSES: tuple[KeyPath, ...] = (("processes",),)
ACTIVITY: tuple[KeyPath, ...] = tuple(
    ("dynamic_metrics", name) for name in ("utilization", "power", "temperature")
)


def load(path: Path) -> dict[str, Any]:
    """The document on disk ({} when absent or blank)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    doc = yaml.safe_load(text)
    if doc is None:
        return {}
    assert isinstance(doc, dict), f"{path} is not a mapping: {text!r}"
    return doc


def _devices(doc: Mapping[str, Any] | None) -> Mapping[Any, Any]:
    devices = (doc or {}).get("devices") or {}
    return devices if isinstance(devices, Mapping) else {}


def memory(doc: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """{"<i>": {"used_bytes": u, "free_bytes": f}} for every device bucket that has them."""
    out: dict[str, dict[str, Any]] = {}
    for index, bucket in _devices(doc).items():
        block = (bucket or {}).get("memory") if isinstance(bucket, Mapping) else None
        if isinstance(block, Mapping):
            picked = {key[-1]: block[key[-1]] for key in MEMORY if key[-1] in block}
            if picked:
                out[str(index)] = picked
    return out


def processes(doc: Mapping[str, Any] | None) -> dict[str, list[Any]]:
    """{"<i>": [entry, ...]} for every device bucket with a `processes` list."""
    return {
        str(index): list(bucket["processes"])
        for index, bucket in _devices(doc).items()
        if isinstance(bucket, Mapping) and "processes" in bucket
    }


def without(
    doc: Mapping[str, Any] | None,
    keys: Collection[KeyPath],
    devices: Collection[str] | None = None,
) -> dict[str, Any]:
    """A copy of `doc` without `keys` on `devices` ("<i>"; all when None), pruning empty maps."""
    out = copy.deepcopy(dict(doc or {}))
    buckets = out.get("devices")
    if not isinstance(buckets, dict):
        return out
    for index in list(buckets):
        if devices is not None and str(index) not in devices:
            continue
        for key in keys:
            _drop(buckets, (index, *key))
    if not buckets:
        del out["devices"]
    return out


def _drop(node: dict[Any, Any], path: tuple[Any, ...]) -> None:
    """Delete `path` under `node`, and each map on the way that it leaves empty."""
    head, rest = path[0], path[1:]
    child = node.get(head)
    if not rest:
        node.pop(head, None)
        return
    if isinstance(child, dict):
        _drop(child, rest)
        if not child:
            del node[head]


def without_memory(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    return without(doc, MEMORY)


def without_processes(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    return without(doc, PROCESSES)


def same(a: Any, b: Any) -> bool:
    """Equality that also demands equal types: 1, 1.0, True and "1" all differ."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
