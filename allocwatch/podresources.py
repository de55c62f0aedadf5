"""Client for the kubelet pod-resources v1 API: who holds which device."""

from __future__ import annotations

import os
import re
import socket
import stat
import threading
import time
import urllib.parse
from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from allocwatch.kubeletapi.podresources.v1 import api_pb2
from allocwatch.reconcile import physical_device_id
from allocwatch.timerslack import timer_slack

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_RESOURCE_NAMES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")

# The kubelet dials plugins with authority "localhost"; Python grpc would send
# the %-encoded socket path, which strict HTTP/2 servers reject. The size limit
# matches other pod-resources clients (a node with many pods exceeds 4 MiB).
# Short reconnect backoff: after a kubelet restart the socket returns within
# seconds and we want the next poll to find it, not a 2-minute backoff. Not
# `grpc.min_reconnect_backoff_ms`: despite its name it is the connect timeout,
# and a kubelet slow to answer a new connection (under load, or with grpc's
# timers late by GRPC_TIMER_SLACK_NS) would fail every attempt; our deadlines
# (List's, the dial's) bound the wait instead.
# No BDP probing: it tunes the flow-control window to a network's bandwidth-
# delay product, which a local socket does not have, and the ping and timer it
# adds to each response keep grpc's thread pool waking for the next second
# (measured: 0.5-1 ms of process CPU per poll at 1-2 s intervals).
CHANNEL_OPTIONS = (
    ("grpc.default_authority", "localhost"),
    ("grpc.max_receive_message_length", 16 << 20),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.http2.bdp_probe", 0),
)

# grpc starts its threads with the first channel (a pool of four, a lifeguard
# and a timer thread), and they poll for work on timeouts that start at 15 ms,
# grow 1.3x per empty wakeup, and start over whenever grpc's timer loop hands
# one of them a task, which it does at least once a second, call or no call:
# about 20 wakeups and 1 ms of CPU a second on an idle node (`make bench`).
# Started under this timer slack, their timeouts may end up to this much late
# and together: about 3 wakeups and 0.14 ms a second at 1 s, against 5.5 and
# 0.23 ms at 0.5 s (2 s gains only 0.04 ms more). Work handed to them wakes
# them at once as before, and List's deadline is kept by the calling thread.
# The price: grpc's own timers may fire up to this much late, and about one
# connect in 60 on a new channel (startup, or after a kubelet restart) waits
# for a late timer, up to about twice the slack. abseil's one-time
# measurement of the CPU clock would be slowed as well, so it is taken before
# the slack is (_measure_the_clock_at_normal_slack).
GRPC_TIMER_SLACK_NS = 1_000_000_000

# wait_ready's probe: the gRPC health service's Check, with an empty request
# (all fields default). Any answer, UNIMPLEMENTED included, proves a gRPC server.
READY_PROBE_METHOD = "/grpc.health.v1.Health/Check"
# How soon wait_ready tries again after the socket was absent or refused.
READY_RETRY_SECONDS = 0.1

_LIST = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"].methods_by_name["List"]
LIST_METHOD = f"/{_LIST.containing_service.full_name}/{_LIST.name}"


@dataclass(frozen=True)
class Claim:
    """One device id held by one container of one pod."""

    namespace: str
    pod: str
    container: str
    resource_name: str
    device_id: str

    @property
    def physical_id(self) -> str:
        """The GPU behind a time-slicing/MPS replica id `GPU-<uuid>::<n>`."""
        return physical_device_id(self.device_id)


def claims_from_response(
    response: api_pb2.ListPodResourcesResponse, resource_names: Set[str]
) -> list[Claim]:
    """One claim per (pod, container, device id), in List order, no de-duplication."""
    return [claim for pod in response.pod_resources for claim in _pod_claims(pod, resource_names)]


class ClaimDecoder:
    """claims_from_response for a List response still in its wire bytes.

    A List identical to the previous one, as on an idle node, gives that
    List's claims again without being decoded. Otherwise only the pods that
    can hold a claim are decoded: protobuf stores strings verbatim, so a pod
    holding a watched resource contains its name's bytes, and a pod without
    them is skipped undecoded (a false match only costs a decode). Between two
    polls nearly every pod is byte-for-byte the same, so the claims of the
    previous List's pods are reused rather than scanned again; only that
    List's pods are remembered.
    """

    def __init__(self, resource_names: Set[str]) -> None:
        self.resource_names = frozenset(resource_names)
        self._mentions_a_name = re.compile(
            b"|".join(re.escape(n.encode()) for n in sorted(self.resource_names))
        )
        self._previous: dict[bytes, list[Claim]] = {}
        self._previous_response: bytes | None = None
        self._previous_claims: list[Claim] = []

    def __call__(self, response: bytes) -> list[Claim]:
        """One claim per (pod, container, device id), in List order, no de-duplication.

        Raises DecodeError for a response that is not a ListPodResourcesResponse.
        """
        if response == self._previous_response:
            return list(self._previous_claims)
        previous, current = self._previous, {}
        claims: list[Claim] = []
        for encoded in _parse_list(response).pod_resources:
            pod_claims = previous.get(encoded)
            if pod_claims is None:
                pod_claims = self._decode(encoded)
            current[encoded] = pod_claims
            claims.extend(pod_claims)
        self._previous = current
        self._previous_response, self._previous_claims = response, claims
        return list(claims)

    def _decode(self, encoded: bytes) -> list[Claim]:
        if not self.resource_names or not self._mentions_a_name.search(encoded):
            return []
        return _pod_claims(api_pb2.PodResources.FromString(encoded), self.resource_names)


# The response's pods, each still encoded (EncodedPodResourcesList in
# protos/allocwatch/kubeletapi/podresources/v1/api.proto).
_parse_list = api_pb2.EncodedPodResourcesList.FromString


def _pod_claims(pod: api_pb2.PodResources, resource_names: Set[str]) -> list[Claim]:
    return [
        Claim(pod.namespace, pod.name, container.name, devices.resource_name, device_id)
        for container in pod.containers
        for devices in container.devices
        if devices.resource_name in resource_names
        for device_id in devices.device_ids
    ]


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


_TASKS = "/proc/self/task"
# How long the first channel waits for the threads of its throwaway to exit.
THROWAWAY_EXIT_SECONDS = 1.0
_clock_measured = False


def _measure_the_clock_at_normal_slack(target: str) -> None:
    """Have grpc's one-time measurement of the CPU clock done before any slack.

    Once per process, abseil times the CPU clock over 1 ms and 2 ms sleeps on
    a grpc thread, and every grpc call or channel made meanwhile waits for it.
    On threads started under GRPC_TIMER_SLACK_NS each sleep may last up to the
    slack, which made up to one start in seven take over a second to act on
    a stop signal (README, Shutdown; `make bench-shutdown`). A throwaway
    channel, made at the caller's slack, starts grpc's threads, and one of
    them takes the measurement in a few ms. Once the channel is closed its
    threads exit (within about 5 ms), so the next channel starts new ones,
    which inherit the slack. Threads not gone in time would be reused without
    it, which costs CPU, not correctness.
    """
    global _clock_measured
    if _clock_measured or not os.path.isdir(_TASKS):
        return
    _clock_measured = True
    before = len(os.listdir(_TASKS))
    grpc.insecure_channel(target, options=CHANNEL_OPTIONS).close()
    deadline = time.monotonic() + THROWAWAY_EXIT_SECONDS
    while len(os.listdir(_TASKS)) > before and time.monotonic() < deadline:
        time.sleep(0.002)


def open_channel(socket_path: str) -> grpc.Channel:
    """A channel to the pod-resources socket with our options."""
    # grpc reads `unix://relative/path` as an authority, not a path, and the
    # path as a URI's: `?`, `#` and `%` must be escaped.
    target = "unix://" + urllib.parse.quote(os.path.abspath(socket_path), safe="/")
    _measure_the_clock_at_normal_slack(target)
    # The first channel starts grpc's threads; see GRPC_TIMER_SLACK_NS.
    with timer_slack(GRPC_TIMER_SLACK_NS):
        return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def list_callable(channel: grpc.Channel, **options: Any) -> grpc.UnaryUnaryMultiCallable:
    """The generated stub's List, but answering with the response's bytes (see ClaimDecoder)."""
    return channel.unary_unary(
        LIST_METHOD,
        request_serializer=api_pb2.ListPodResourcesRequest.SerializeToString,
        response_deserializer=None,
        **options,
    )


class Interrupted(BaseException):
    """Raised by a shutdown signal handler to abandon an in-flight List."""


class ListError(RuntimeError):
    """List failed; the caller keeps its previous reading."""


class PodResourcesClient:
    """A channel to the pod-resources socket with a deadline on every call."""

    def __init__(
        self,
        socket_path: str,
        resource_names: Iterable[str] = DEFAULT_RESOURCE_NAMES,
        call_timeout: float = 5.0,
    ) -> None:
        self.socket_path = socket_path
        self.resource_names = frozenset(resource_names)
        self.call_timeout = call_timeout
        self._decode = ClaimDecoder(self.resource_names)
        self._channel: grpc.Channel | None = None
        self._list: grpc.UnaryUnaryMultiCallable | None = None
        self._probe: grpc.UnaryUnaryMultiCallable | None = None
        self.in_call = False
        # Set by a shutdown signal handler: calls not yet started are not made.
        self.stopping = False

    def _connect(self) -> grpc.UnaryUnaryMultiCallable:
        if self._list is None:
            self._channel = open_channel(self.socket_path)
            self._list = list_callable(self._channel, _registered_method=True)
            self._probe = self._channel.unary_unary(READY_PROBE_METHOD)
        return self._list

    def wait_ready(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Block until a gRPC server answers on the socket, at most `timeout` seconds.

        Returns False on timeout, or when `stop` is set or a shutdown signal
        interrupts the wait.

        Ready means what a blocking dial means: connected, and the server
        speaks gRPC. A call that any gRPC server answers at once proves it:
        the health service's Check, which the kubelet does not serve and
        answers UNIMPLEMENTED. Not List, because a kubelet whose List hangs is
        reachable (the loop's deadline and retries handle it); and not
        `grpc.channel_ready_future`, which leaves a thread watching the
        channel on grpc's timers, late by the timer slack, that closing the
        channel then waits for (with a 2 s slack, a SIGTERM soon after startup
        took 2.3 s to exit). A socket that is absent or refuses gets a fresh
        channel 0.1 s later, which connects at once rather than after grpc's
        reconnect backoff.
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (stop is not None and stop.is_set()):
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
            pause = min(READY_RETRY_SECONDS, max(0.0, deadline - time.monotonic()))
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)

    def list_claims(self) -> list[Claim]:
        """List the claims now. Raises ListError, or Interrupted on shutdown.

        A blocking call, not a future: futures start a polling thread per call,
        which costs more than the whole rest of a poll. grpc checks for signals
        every 200 ms during a blocking call, so a shutdown handler can abandon
        a hung List by raising Interrupted while `in_call` is set.

        The channel stays open between polls: a channel per call would start
        and stop grpc's thread pool each time, which costs about twice a poll.
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
            return self._decode(response)
        except DecodeError as exc:
            # What grpc would report as INTERNAL, had it decoded the response.
            raise ListError(
                f"list pod resources at {self.socket_path}: the response does not decode: {exc}"
            ) from exc

    def _call(self, method: grpc.UnaryUnaryMultiCallable, request: Any, timeout: float) -> Any:
        """One blocking call, with `in_call` set for exactly its length.

        Not a moment longer: a shutdown handler raises Interrupted only while
        it is set, and one raised in the handling of a failed call (while
        closing the channel) would escape the `except Interrupted` beside it.
        A handler that ran before (while the channel was made, say) set
        `stopping` instead, so the call raises Interrupted rather than wait
        out its deadline on a kubelet that does not answer.
        """
        self.in_call = True
        try:
            if self.stopping:
                raise Interrupted
            return method(request, timeout=timeout)
        finally:
            self.in_call = False

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._list = None
        self._probe = None
