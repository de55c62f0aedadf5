"""Client for the kubelet pod-resources v1 API: it lists the node's claims."""

from __future__ import annotations

import logging
import os
import socket
import stat
import time
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from allocwatch.claimdecoder import ClaimDecoder
from allocwatch.claims import Claim, ListError
from allocwatch.grpcruntime import open_channel
from allocwatch.kubeletapi.podresources.v1 import api_pb2
from allocwatch.shutdown import Interrupted, Shutdown

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_RESOURCE_NAMES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
DEFAULT_DRA_DRIVERS = ("gpu.nvidia.com",)

log = logging.getLogger(__name__)

# wait_ready's probe: the gRPC health service's Check, with an empty request
# (all fields default). Any answer, UNIMPLEMENTED included, proves a gRPC server.
READY_PROBE_METHOD = "/grpc.health.v1.Health/Check"
# How soon wait_ready tries again after the socket was absent or refused.
READY_RETRY_SECONDS = 0.1

_LIST = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"].methods_by_name["List"]
LIST_METHOD = f"/{_LIST.containing_service.full_name}/{_LIST.name}"


def list_callable(channel: grpc.Channel, **options: Any) -> grpc.UnaryUnaryMultiCallable:
    """The generated stub's List, but answering with the response's bytes (see ClaimDecoder)."""
    return channel.unary_unary(
        LIST_METHOD,
        request_serializer=api_pb2.ListPodResourcesRequest.SerializeToString,
        response_deserializer=None,
        **options,
    )


class PodResourcesClient:
    """A channel to the pod-resources socket with a deadline on every call.

    A `Lister`. Its blocking calls run inside `shutdown.call()`, so a stop
    signal abandons a hung List, and a call asked for after the stop is not made.
    """

    def __init__(
        self,
        socket_path: str,
        resource_names: Iterable[str] = DEFAULT_RESOURCE_NAMES,
        call_timeout: float = 5.0,
        shutdown: Shutdown | None = None,
        dra_drivers: Iterable[str] = DEFAULT_DRA_DRIVERS,
    ) -> None:
        self.socket_path = socket_path
        self.resource_names = frozenset(resource_names)
        self.dra_drivers = frozenset(dra_drivers)
        self.call_timeout = call_timeout
        self.shutdown = shutdown if shutdown is not None else Shutdown()
        self._decode = ClaimDecoder(self.resource_names, self.dra_drivers)
        self._told_unnamed_dra = False
        self._channel: grpc.Channel | None = None
        self._list: grpc.UnaryUnaryMultiCallable | None = None
        self._probe: grpc.UnaryUnaryMultiCallable | None = None

    def _connect(self) -> grpc.UnaryUnaryMultiCallable:
        if self._list is None:
            self._channel = open_channel(self.socket_path)
            self._list = list_callable(self._channel, _registered_method=True)
            self._probe = self._channel.unary_unary(READY_PROBE_METHOD)
        return self._list

    def wait_ready(self, timeout: float) -> bool:
        """Block until a gRPC server answers on the socket, at most `timeout` seconds.

        Returns False on timeout, or on shutdown. Ready means what a blocking
        dial means: connected, and the server speaks gRPC, which a call any
        gRPC server answers at once proves: the health service's Check, which
        the kubelet answers UNIMPLEMENTED. Not List, because a kubelet whose
        List hangs is reachable (the loop's deadline and retries handle it);
        and not `grpc.channel_ready_future`, whose watcher thread runs on
        grpc's slack timers and delays closing the channel. A socket that is
        absent or refuses gets a fresh channel rather than grpc's backoff.
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.shutdown.is_set():
                return False
            self._connect()
            assert self._probe is not None
            try:
                self._call(self._probe, b"", remaining)
                return True
            except Interrupted:
                self.close()
                return False
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    # DEADLINE_EXCEEDED: not answered in time. Anything else
                    # (UNIMPLEMENTED, as the kubelet says) is a gRPC server's answer.
                    return exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED
                self.close()
            self.shutdown.wait(min(READY_RETRY_SECONDS, max(0.0, deadline - time.monotonic())))

    def list_claims(self) -> Sequence[Claim]:
        """List the claims now. Raises ListError, or Interrupted on shutdown.

        A blocking call, not a future: futures start a polling thread per
        call, which costs more than the rest of a poll. The channel stays open
        between polls: one per call would start and stop grpc's threads each time.
        """
        list_pods = self._connect()
        try:
            response = self._call(list_pods, api_pb2.ListPodResourcesRequest(), self.call_timeout)
        except Interrupted:
            self.close()
            raise
        except grpc.RpcError as exc:
            # A fresh channel on the next poll: after a kubelet restart the old
            # one may sit in reconnect backoff while the new socket is ready.
            self.close()
            raise ListError(
                f"list pod resources at {self.socket_path}: {exc.code().name}: {exc.details()}"
            ) from exc
        try:
            claims = self._decode(response)
        except DecodeError as exc:
            # What grpc would report as INTERNAL, had it decoded the response.
            raise ListError(
                f"list pod resources at {self.socket_path}: the response does not decode: {exc}"
            ) from exc
        if self._decode.unnamed_dra_entries and not self._told_unnamed_dra:
            # Once per run: the kubelet's version does not change under us.
            log.warning(
                "the kubelet lists DRA claims without driver and device names "
                "(Kubernetes before 1.31): their devices are not counted"
            )
            self._told_unnamed_dra = True
        return claims

    def _call(self, method: grpc.UnaryUnaryMultiCallable, request: Any, timeout: float) -> Any:
        with self.shutdown.call():
            return method(request, timeout=timeout)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._list = None
        self._probe = None


def why_unreachable(socket_path: str) -> str:
    """Why a socket did not answer, in words for the error a user reads."""
    try:
        st = os.stat(socket_path)
    except FileNotFoundError:
        return "it does not exist"
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISSOCK(st.st_mode):
        return "it is not a socket"
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(socket_path)
        except OSError as exc:
            return f"connecting to it fails: {exc.strerror or exc}"
    return "it accepts connections, but no gRPC server answered"
