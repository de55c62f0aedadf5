"""A fake kubelet plugin watcher: registers the plugin the way the kubelet does.

`register()` waits for a socket in the registry directory, calls `GetInfo`,
checks what the kubelet's DRA plugin handler checks (type, a supported
version, an endpoint socket), dials the endpoint and reports success with
`NotifyRegistrationStatus`. The returned client calls the DRA service as the
kubelet's DRA manager does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from devtools.waiting import wait_until
from e2e.kubeletapi.dra.v1 import api_pb2 as dra_pb2
from e2e.kubeletapi.dra.v1 import api_pb2_grpc as dra_grpc
from e2e.kubeletapi.pluginregistration.v1 import api_pb2 as reg_pb2
from e2e.kubeletapi.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from tests.support import START_SECONDS

OPTIONS = [("grpc.default_authority", "localhost")]
# The plugin's start (an interpreter and grpc) is in these waits: see START_SECONDS.
TIMEOUT = START_SECONDS


@dataclass
class Registration:
    socket: Path
    info: Any
    channel: grpc.Channel

    def prepare(self, *claims: tuple[str, str, str]) -> Any:
        """claims: (namespace, uid, name)."""
        return dra_grpc.DRAPluginStub(self.channel).NodePrepareResources(
            dra_pb2.NodePrepareResourcesRequest(claims=_claims(claims)), timeout=TIMEOUT
        )

    def unprepare(self, *claims: tuple[str, str, str]) -> Any:
        return dra_grpc.DRAPluginStub(self.channel).NodeUnprepareResources(
            dra_pb2.NodeUnprepareResourcesRequest(claims=_claims(claims)), timeout=TIMEOUT
        )


def _claims(claims: Sequence[tuple[str, str, str]]) -> list[Any]:
    return [dra_pb2.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]


@contextmanager
def _channel(path: Path) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel("unix://" + str(path), options=OPTIONS) as channel:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
        yield channel


class FakePluginWatcher:
    def __init__(self, registry_dir: Path) -> None:
        self.registry_dir = registry_dir
        self._channels: list[grpc.Channel] = []

    def __enter__(self) -> FakePluginWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        for channel in self._channels:
            channel.close()

    def socket(self, timeout: float = TIMEOUT) -> Path:
        def found() -> Path | None:
            sockets = [p for p in self.registry_dir.iterdir() if p.is_socket()]
            return sockets[0] if len(sockets) == 1 else None

        return wait_until(found, timeout, f"one plugin socket in {self.registry_dir}")

    def register(self, timeout: float = TIMEOUT) -> Registration:
        path = self.socket(timeout)
        deadline = time.monotonic() + timeout
        with _channel(path) as channel:
            registration = reg_grpc.RegistrationStub(channel)
            info = registration.GetInfo(reg_pb2.InfoRequest(), timeout=TIMEOUT)
            assert info.type == "DRAPlugin", info
            assert "v1.DRAPlugin" in info.supported_versions, info
            endpoint = Path(info.endpoint)
            assert endpoint.is_absolute() and endpoint.is_socket(), info
            dra = grpc.insecure_channel("unix://" + info.endpoint, options=OPTIONS)
            self._channels.append(dra)
            grpc.channel_ready_future(dra).result(timeout=max(0.1, deadline - time.monotonic()))
            registration.NotifyRegistrationStatus(
                reg_pb2.RegistrationStatus(plugin_registered=True), timeout=TIMEOUT
            )
        return Registration(path, info, dra)

    def refuse(self, error: str) -> None:
        """Report a failed registration, as the kubelet does for an unsupported plugin."""
        with _channel(self.socket()) as channel:
            reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
                reg_pb2.RegistrationStatus(plugin_registered=False, error=error), timeout=TIMEOUT
            )
