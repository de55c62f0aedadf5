"""Plugin lifecycle: serve on our socket, register with the kubelet, follow kubelet restarts.

The kubelet deletes every plugin socket when it starts and then re-creates
`kubelet.sock`. Each poll therefore checks two things: that our own socket
still exists (otherwise the server is restarted), and that `kubelet.sock` is
still the one we registered with (otherwise we register again).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

from e2e.kubeletplugin.sockets import SocketIdentity, remove_if_ours, socket_identity

from .deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from .devices import PluginDevice
from .servicer import DevicePluginServicer

log = logging.getLogger("fakeplugin")

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
CHANNEL_OPTIONS = [("grpc.default_authority", "localhost")]


def default_socket_name(resource_name: str) -> str:
    return "fakeplugin-" + resource_name.replace("/", "_") + ".sock"


class DevicePlugin:
    def __init__(
        self,
        devices: list[PluginDevice],
        resource_name: str,
        plugin_dir: Path,
        socket_name: str,
        *,
        poll_interval: float = 0.5,
        register_timeout: float = 5.0,
    ) -> None:
        if "/" in socket_name:
            raise ValueError(f"socket name {socket_name!r} must be a file name")
        self.devices = devices
        self.resource_name = resource_name
        self.plugin_dir = plugin_dir
        self.socket_name = socket_name
        self.socket_path = plugin_dir / socket_name
        self.kubelet_socket = plugin_dir / KUBELET_SOCKET
        self.poll_interval = poll_interval
        self.register_timeout = register_timeout
        self._server: grpc.Server | None = None
        self._servicer: DevicePluginServicer | None = None
        self._served: SocketIdentity | None = None

    def start_server(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        servicer = DevicePluginServicer(self.devices)
        # Each ListAndWatch stream holds a worker; the kubelet keeps one open.
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        api_pb2_grpc.add_DevicePluginServicer_to_server(servicer, server)
        server.add_insecure_port("unix://" + str(self.socket_path))
        server.start()
        self._server, self._servicer = server, servicer
        self._served = socket_identity(self.socket_path)
        log.info("serving %s on %s", self.resource_name, self.socket_path)

    def stop_server(self) -> None:
        if self._server is None:
            return
        assert self._servicer is not None
        self._servicer.close()
        self._server.stop(grace=1).wait()
        remove_if_ours(self.socket_path, self._served)
        self._server = self._servicer = self._served = None
        log.info("stopped serving on %s", self.socket_path)

    def serving(self) -> bool:
        return self._server is not None and socket_identity(self.socket_path) == self._served

    def register(self) -> None:
        """Register with the kubelet; raises grpc.RpcError or grpc.FutureTimeoutError."""
        with grpc.insecure_channel(
            "unix://" + str(self.kubelet_socket), options=CHANNEL_OPTIONS
        ) as channel:
            grpc.channel_ready_future(channel).result(timeout=self.register_timeout)
            api_pb2_grpc.RegistrationStub(channel).Register(
                api_pb2.RegisterRequest(
                    version=API_VERSION,
                    endpoint=self.socket_name,
                    resource_name=self.resource_name,
                    options=api_pb2.DevicePluginOptions(),
                ),
                timeout=self.register_timeout,
            )

    def run(self, stop: threading.Event) -> None:
        """Serve and stay registered until `stop` is set, then shut down cleanly."""
        registered_with: SocketIdentity | None = None
        failures = 0
        try:
            while not stop.is_set():
                if not self.serving():
                    if self._server is not None:
                        log.info("our socket %s is gone (kubelet restart?)", self.socket_path)
                        self.stop_server()
                    self.start_server()
                    registered_with = None
                kubelet = socket_identity(self.kubelet_socket)
                if kubelet is not None and kubelet != registered_with:
                    started = time.monotonic()
                    try:
                        self.register()
                    except (grpc.RpcError, grpc.FutureTimeoutError) as exc:
                        failures += 1
                        if failures == 1 or failures % 20 == 0:
                            log.warning("registering with %s failed: %s", self.kubelet_socket, exc)
                    else:
                        registered_with, failures = kubelet, 0
                        log.info(
                            "registered %s (%d devices) with %s in %.0f ms",
                            self.resource_name,
                            len(self.devices),
                            self.kubelet_socket,
                            (time.monotonic() - started) * 1000,
                        )
                stop.wait(self.poll_interval)
        finally:
            self.stop_server()
