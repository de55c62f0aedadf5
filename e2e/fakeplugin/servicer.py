"""The DevicePlugin gRPC service the kubelet dials back into."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from .deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from .devices import PluginDevice, visible_devices

log = logging.getLogger("fakeplugin")

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


class DevicePluginServicer(api_pb2_grpc.DevicePluginServicer):
    """Serves a fixed device list. `close()` ends every open ListAndWatch stream."""

    def __init__(self, devices: Sequence[PluginDevice]) -> None:
        self._devices = list(devices)
        self._known = {d.id for d in self._devices}
        self._lock = threading.Lock()
        self._streams: set[threading.Event] = set()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for ended in self._streams:
                ended.set()

    def GetDevicePluginOptions(self, request: Any, context: grpc.ServicerContext) -> Any:
        return api_pb2.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=False
        )

    def ListAndWatch(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        ended = threading.Event()
        with self._lock:
            if self._closed:
                return
            self._streams.add(ended)
        context.add_callback(ended.set)
        try:
            log.info(
                "ListAndWatch: sending %d devices (%d healthy)",
                len(self._devices),
                sum(d.healthy for d in self._devices),
            )
            yield api_pb2.ListAndWatchResponse(
                devices=[api_pb2.Device(ID=d.id, health=d.health) for d in self._devices]
            )
            # The list never changes; hold the stream open until either side ends it.
            ended.wait()
        finally:
            with self._lock:
                self._streams.discard(ended)

    def Allocate(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = api_pb2.AllocateResponse()
        for container in request.container_requests:
            ids = list(container.devices_ids)
            unknown = [i for i in ids if i not in self._known]
            if unknown:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown device ids {unknown}")
            visible = visible_devices(ids)
            log.info("Allocate %s -> %s=%s", ",".join(ids), VISIBLE_DEVICES_ENV, visible)
            response.container_responses.add(envs={VISIBLE_DEVICES_ENV: visible})
        return response

    def PreStartContainer(self, request: Any, context: grpc.ServicerContext) -> Any:
        return api_pb2.PreStartContainerResponse()
