"""A fake kubelet device manager: the Registration service on a real unix socket.

Like the kubelet, `Register` validates the request, dials the plugin's
endpoint back, calls `GetDevicePluginOptions` and keeps a `ListAndWatch`
stream open, recording every device list it receives. `restart()` does what
a kubelet restart does to the plugin directory: the old server goes away, every
socket in the directory is deleted, and a new `kubelet.sock` is created.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from devtools.waiting import wait_until
from e2e.fakeplugin.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from tests.support import START_SECONDS

T = TypeVar("T")
OPTIONS = [("grpc.default_authority", "localhost")]


@dataclass
class Registration:
    request: Any
    channel: grpc.Channel
    options: Any
    device_lists: list[list[tuple[str, str]]] = field(default_factory=list)
    stream_ended: threading.Event = field(default_factory=threading.Event)

    @property
    def devices(self) -> list[tuple[str, str]] | None:
        """The latest (id, health) list from ListAndWatch, or None before the first."""
        return self.device_lists[-1] if self.device_lists else None

    def allocate(self, *containers: list[str]) -> Any:
        stub = api_pb2_grpc.DevicePluginStub(self.channel)
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=c) for c in containers]
        )
        return stub.Allocate(request, timeout=5)


class _Registration(api_pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeDeviceManager) -> None:
        self.kubelet = kubelet

    def Register(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad version {request.version!r}")
        endpoint = self.kubelet.plugin_dir / request.endpoint
        channel = grpc.insecure_channel("unix://" + str(endpoint), options=OPTIONS)
        try:
            grpc.channel_ready_future(channel).result(timeout=5)
            options = api_pb2_grpc.DevicePluginStub(channel).GetDevicePluginOptions(
                api_pb2.Empty(), timeout=5
            )
        except (grpc.RpcError, grpc.FutureTimeoutError) as exc:
            channel.close()
            context.abort(grpc.StatusCode.UNKNOWN, f"cannot dial plugin at {endpoint}: {exc}")
        registration = Registration(request, channel, options)
        threading.Thread(target=self._watch, args=(registration,), daemon=True).start()
        self.kubelet.add(registration)
        return api_pb2.Empty()

    def _watch(self, registration: Registration) -> None:
        stub = api_pb2_grpc.DevicePluginStub(registration.channel)
        try:
            for response in stub.ListAndWatch(api_pb2.Empty()):
                registration.device_lists.append([(d.ID, d.health) for d in response.devices])
        except grpc.RpcError:
            pass
        finally:
            registration.stream_ended.set()


class FakeDeviceManager:
    def __init__(self, plugin_dir: Path) -> None:
        self.plugin_dir = plugin_dir
        self.socket_path = plugin_dir / "kubelet.sock"
        self.registrations: list[Registration] = []
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    def __enter__(self) -> FakeDeviceManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, registration: Registration) -> None:
        with self._lock:
            self.registrations.append(registration)

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port("unix://" + str(self.socket_path))
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=0).wait()
            self._server = None
        with self._lock:
            for registration in self.registrations:
                registration.channel.close()

    def restart(self) -> None:
        self.stop()
        for entry in self.plugin_dir.iterdir():
            if entry.is_socket():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry)
        self.start()

    def wait_for_registrations(self, count: int, timeout: float = START_SECONDS) -> Registration:
        """Wait until `count` registrations have arrived and the last one has listed devices.

        The default is START_SECONDS: the waits of these tests hold the start of a
        plugin process (an interpreter and grpc), and bound nothing they check.
        """

        def ready() -> Registration | None:
            with self._lock:
                if len(self.registrations) >= count and self.registrations[-1].devices is not None:
                    return self.registrations[-1]
            return None

        return wait_until(ready, timeout, f"registration #{count} with a device list")
