"""The API objects the plugin publishes, as plain dicts (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .inventory import DraDevice

API_VERSION = "resource.k8s.io/v1"
RESOURCE_PATH = "/apis/" + API_VERSION
SLICES_PATH = RESOURCE_PATH + "/resourceslices"
CLASSES_PATH = RESOURCE_PATH + "/deviceclasses"
LABELS = {"app.kubernetes.io/part-of": "allocwatch-e2e"}


def claim_path(namespace: str, name: str) -> str:
    return f"{RESOURCE_PATH}/namespaces/{namespace}/resourceclaims/{name}"


def slice_name(driver: str, node: str) -> str:
    return f"{node}-{driver}"


def slice_spec(driver: str, node: str, devices: Sequence[DraDevice], generation: int) -> Any:
    """One pool per node, named after it, in a single slice, as NVIDIA's driver does."""
    return {
        "driver": driver,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        "devices": [
            {
                "name": d.name,
                "attributes": {
                    "uuid": {"string": d.uuid},
                    "minor": {"int": d.minor},
                    "index": {"int": d.index},
                },
            }
            for d in devices
        ],
    }


def resource_slice(driver: str, node: str, devices: Sequence[DraDevice], generation: int) -> Any:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(driver, node), "labels": dict(LABELS)},
        "spec": slice_spec(driver, node, devices, generation),
    }


def device_class(driver: str) -> Any:
    """Named after the driver, like the class NVIDIA's chart installs."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": driver, "labels": dict(LABELS)},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def same_devices(published: Any, wanted: Any) -> bool:
    """Whether a published slice spec offers what `wanted` does. Only the fields we
    set are compared: the API server may add defaults, and the generation moves."""

    def offer(spec: Any) -> Any:
        return (
            spec.get("driver"),
            spec.get("nodeName"),
            spec.get("pool", {}).get("name"),
            [(d.get("name"), d.get("attributes")) for d in spec.get("devices", [])],
        )

    return isinstance(published, dict) and offer(published) == offer(wanted)
