"""Keeps the DeviceClass and this node's ResourceSlice in the API server.

`publish()` is idempotent and cheap when nothing changed (two GETs), so it
runs after every registration (the kubelet deletes a node's slices when it
starts) and on a resync timer, which also repairs a slice deleted by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .inventory import DraDevice
from .kubeapi import ApiError, KubeApi
from .resources import (
    CLASSES_PATH,
    SLICES_PATH,
    device_class,
    resource_slice,
    same_devices,
    slice_name,
)

log = logging.getLogger("fakedra")

CONFLICT = 409


class SlicePublisher:
    def __init__(self, api: KubeApi, driver: str, node: str, devices: Sequence[DraDevice]) -> None:
        self.api = api
        self.driver = driver
        self.node = node
        self.devices = list(devices)
        self.name = slice_name(driver, node)

    def publish(self) -> bool:
        """Create or update what is missing or stale; True if anything was written.

        Raises ApiError; the caller retries on its next tick.
        """
        wrote = self._ensure_class()
        return self._ensure_slice() or wrote

    def _ensure_class(self) -> bool:
        if self.api.get(f"{CLASSES_PATH}/{self.driver}") is not None:
            return False
        try:
            self.api.create(CLASSES_PATH, device_class(self.driver))
        except ApiError as exc:
            if exc.status == CONFLICT:  # created meanwhile, by another of us
                return False
            raise
        log.info("created DeviceClass %s", self.driver)
        return True

    def _ensure_slice(self) -> bool:
        path = f"{SLICES_PATH}/{self.name}"
        published = self.api.get(path)
        if published is None:
            self.api.create(SLICES_PATH, resource_slice(self.driver, self.node, self.devices, 1))
            log.info(
                "created ResourceSlice %s: %s",
                self.name,
                ", ".join(f"{d.name}={d.uuid}" for d in self.devices),
            )
            return True
        generation = int(published.get("spec", {}).get("pool", {}).get("generation", 0))
        wanted = resource_slice(self.driver, self.node, self.devices, generation + 1)
        if same_devices(published.get("spec"), wanted["spec"]):
            return False
        wanted["metadata"]["resourceVersion"] = published["metadata"]["resourceVersion"]
        self.api.replace(path, wanted)
        log.info("updated ResourceSlice %s to pool generation %d", self.name, generation + 1)
        return True
