"""Plugin lifecycle: serve both sockets, keep the slice published, follow kubelet restarts.

The kubelet's plugin watcher notices sockets appearing in its registry
directory, calls `GetInfo` on them, dials the endpoint named there and reports
back through `NotifyRegistrationStatus`; a restarted kubelet does all of that
again for sockets already present. Each poll checks that our sockets still
exist (otherwise the server restarts, which re-creates them and so registers
anew) and publishes the slice when a registration happened or the resync
timer ran out.
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

from e2e.kubeletapi.dra.v1 import api_pb2_grpc as dra_grpc
from e2e.kubeletapi.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from e2e.kubeletplugin.sockets import SocketIdentity, remove_if_ours, socket_identity

from .kubeapi import ApiError, KubeApi
from .publisher import SlicePublisher
from .servicer import DraServicer, RegistrationServicer

log = logging.getLogger("fakedra")


def registration_socket(registry_dir: Path, driver: str) -> Path:
    """`<driver>-reg.sock`, the name the upstream kubelet-plugin helper gives it."""
    return registry_dir / f"{driver}-reg.sock"


def dra_socket(plugin_root: Path, driver: str) -> Path:
    return plugin_root / driver / "dra.sock"


class DraPlugin:
    def __init__(
        self,
        api: KubeApi,
        publisher: SlicePublisher,
        registry_dir: Path,
        plugin_root: Path,
        *,
        poll_interval: float = 0.5,
        resync_interval: float = 10.0,
    ) -> None:
        self.api = api
        self.publisher = publisher
        self.driver = publisher.driver
        self.registration_path = registration_socket(registry_dir, self.driver)
        self.dra_path = dra_socket(plugin_root, self.driver)
        self.poll_interval = poll_interval
        self.resync_interval = resync_interval
        self._registered = threading.Event()
        self._server: grpc.Server | None = None
        self._served: dict[Path, SocketIdentity | None] = {}

    def start_server(self) -> None:
        self.dra_path.parent.mkdir(parents=True, exist_ok=True)
        for path in (self.dra_path, self.registration_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        dra_grpc.add_DRAPluginServicer_to_server(DraServicer(self.api, self.driver), server)
        reg_grpc.add_RegistrationServicer_to_server(
            RegistrationServicer(self.driver, str(self.dra_path), self._registered.set), server
        )
        # The DRA socket is bound before the registration socket appears: the
        # kubelet dials the endpoint as soon as it has read it from GetInfo.
        server.add_insecure_port("unix://" + str(self.dra_path))
        server.add_insecure_port("unix://" + str(self.registration_path))
        server.start()
        self._server = server
        self._served = {p: socket_identity(p) for p in (self.dra_path, self.registration_path)}
        log.info("serving %s on %s and %s", self.driver, self.dra_path, self.registration_path)

    def stop_server(self) -> None:
        if self._server is None:
            return
        self._server.stop(grace=1).wait()
        for path, identity in self._served.items():
            remove_if_ours(path, identity)
        self._server, self._served = None, {}
        log.info("stopped serving %s", self.driver)

    def serving(self) -> bool:
        return self._server is not None and all(
            socket_identity(p) == identity for p, identity in self._served.items()
        )

    def run(self, stop: threading.Event) -> None:
        """Serve and keep the slice published until `stop` is set."""
        next_resync = 0.0
        failures = 0
        try:
            while not stop.is_set():
                if not self.serving():
                    if self._server is not None:
                        log.info("a socket of ours is gone (kubelet restart?)")
                        self.stop_server()
                    self.start_server()
                if self._registered.is_set() or time.monotonic() >= next_resync:
                    self._registered.clear()
                    try:
                        self.publisher.publish()
                    except ApiError as exc:
                        failures += 1
                        if failures == 1 or failures % 20 == 0:
                            log.warning("publishing the ResourceSlice failed: %s", exc)
                        # Soon again: after a registration the kubelet may have wiped it.
                        next_resync = time.monotonic() + self.poll_interval
                    else:
                        failures = 0
                        next_resync = time.monotonic() + self.resync_interval
                self._registered.wait(self.poll_interval)
        finally:
            self.stop_server()
