"""The devices the plugin advertises: ids, health, and the physical GPU behind each."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
REPLICA_SEPARATOR = "::"
MAX_ID_LENGTH = 63  # the kubelet rejects longer device ids


@dataclass(frozen=True)
class PluginDevice:
    id: str
    uuid: str
    healthy: bool

    @property
    def health(self) -> str:
        return HEALTHY if self.healthy else UNHEALTHY


def physical_uuid(device_id: str) -> str:
    """`GPU-x::1` -> `GPU-x`; plain ids are returned unchanged."""
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def visible_devices(device_ids: Iterable[str]) -> str:
    """The NVIDIA_VISIBLE_DEVICES value: physical UUIDs, de-duplicated, in request order."""
    return ",".join(dict.fromkeys(physical_uuid(i) for i in device_ids))


def build_inventory(
    uuids: Sequence[str], replicas: int = 1, unhealthy: Collection[str] = ()
) -> list[PluginDevice]:
    """One device per UUID, or `replicas` annotated devices per UUID when replicas > 1.

    `unhealthy` names physical UUIDs (all their replicas) or single replica ids.
    """
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, not {replicas}")
    if not uuids:
        raise ValueError("no GPU UUIDs to advertise")
    if len(set(uuids)) != len(uuids):
        raise ValueError(f"GPU UUIDs are not unique: {list(uuids)}")
    devices = []
    for uuid in uuids:
        ids = [uuid]
        if replicas > 1:
            ids = [f"{uuid}{REPLICA_SEPARATOR}{k}" for k in range(replicas)]
        for device_id in ids:
            if len(device_id) > MAX_ID_LENGTH:
                raise ValueError(f"device id {device_id!r} is longer than {MAX_ID_LENGTH}")
            healthy = uuid not in unhealthy and device_id not in unhealthy
            devices.append(PluginDevice(device_id, uuid, healthy))
    unknown = set(unhealthy) - {d.id for d in devices} - set(uuids)
    if unknown:
        raise ValueError(f"--unhealthy names unknown devices: {sorted(unknown)}")
    return devices
