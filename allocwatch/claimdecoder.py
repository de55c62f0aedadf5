"""Claims from a List response still in its wire bytes."""

from __future__ import annotations

import re
from collections.abc import Set

from allocwatch.claims import Claim, ClaimSource
from allocwatch.kubeletapi.podresources.v1 import api_pb2


class ClaimDecoder:
    """Claims in List order: one per (pod, container, device id) of the device
    plugins, one per (pod, container, claim, device, share id) of DRA.

    Device-plugin ids are not de-duplicated: the kubelet hands each id to one
    container once. A DRA claim is listed once per reference, and a container
    may reference one claim more than once (per request), so its devices are
    de-duplicated within the container. The claim's `cdi_devices` are never
    read: they accumulate over the claim's devices, so they say nothing about
    the device beside which they are listed.

    A List identical to the previous one, as on an idle node, gives that
    List's claims again without being decoded. Otherwise only the pods that
    can hold a claim are decoded: protobuf stores strings verbatim, so a pod
    holding a watched resource or a device of a watched DRA driver contains
    that name's bytes, and a pod without them is skipped undecoded (a false
    match only costs a decode). Between two polls nearly every pod is
    byte-for-byte the same, so the claims of the previous List's pods are
    reused rather than scanned again; only that List's pods are remembered.
    """

    def __init__(self, resource_names: Set[str], dra_drivers: Set[str] = frozenset()) -> None:
        self.resource_names = frozenset(resource_names)
        self.dra_drivers = frozenset(dra_drivers)
        watched = sorted(self.resource_names | self.dra_drivers)
        self._mentions_a_name = re.compile(b"|".join(re.escape(n.encode()) for n in watched))
        self._watches = bool(watched)
        # Each pod of the last List: its claims, and how many of its DRA
        # entries had no driver or device name.
        self._previous: dict[bytes, tuple[list[Claim], int]] = {}
        self._previous_response: bytes | None = None
        self._previous_claims: tuple[Claim, ...] = ()
        # DRA entries of the last List without a driver or device name, as
        # kubelets before 1.31 report them. Counted on decoded pods only.
        self.unnamed_dra_entries = 0

    def __call__(self, response: bytes) -> tuple[Claim, ...]:
        """The claims of an encoded ListPodResourcesResponse.

        The same tuple as last time when the List is unchanged, so the
        caller can tell so without comparing them. Raises DecodeError for a
        response that is not a ListPodResourcesResponse.
        """
        if response == self._previous_response:
            return self._previous_claims
        previous: dict[bytes, tuple[list[Claim], int]] = self._previous
        current: dict[bytes, tuple[list[Claim], int]] = {}
        claims: list[Claim] = []
        unnamed = 0
        for encoded in _parse_list(response).pod_resources:
            pod = previous.get(encoded)
            if pod is None:
                pod = self._decode(encoded)
            current[encoded] = pod
            claims.extend(pod[0])
            unnamed += pod[1]
        self._previous = current
        self._previous_response, self._previous_claims = response, tuple(claims)
        self.unnamed_dra_entries = unnamed
        return self._previous_claims

    def _decode(self, encoded: bytes) -> tuple[list[Claim], int]:
        if not self._watches or not self._mentions_a_name.search(encoded):
            return [], 0
        pod = api_pb2.PodResources.FromString(encoded)
        claims: list[Claim] = []
        unnamed = 0
        for container in pod.containers:
            claims += [
                Claim(pod.namespace, pod.name, container.name, devices.resource_name, device_id)
                for devices in container.devices
                if devices.resource_name in self.resource_names
                for device_id in devices.device_ids
            ]
            if container.dynamic_resources:
                dra, container_unnamed = self._dra_claims(pod, container)
                claims += dra
                unnamed += container_unnamed
        return claims, unnamed

    def _dra_claims(
        self, pod: api_pb2.PodResources, container: api_pb2.ContainerResources
    ) -> tuple[list[Claim], int]:
        """The container's DRA claims, and how many entries lack a driver or device name."""
        claims: dict[Claim, None] = {}  # an insertion-ordered set
        unnamed = 0
        for dynamic in container.dynamic_resources:
            for resource in dynamic.claim_resources:
                if not (resource.driver_name and resource.device_name):
                    unnamed += 1
                    continue
                if resource.driver_name not in self.dra_drivers:
                    continue
                share_id = resource.share_id if resource.HasField("share_id") else None
                claim = Claim(
                    pod.namespace,
                    pod.name,
                    container.name,
                    resource.driver_name,
                    resource.device_name,
                    ClaimSource.DRA,
                    dynamic.claim_namespace,
                    dynamic.claim_name,
                    resource.pool_name,
                    share_id,
                )
                claims[claim] = None
        return list(claims), unnamed


# The response's pods, each still encoded (EncodedPodResourcesList in
# protos/allocwatch/kubeletapi/podresources/v1/api.proto).
_parse_list = api_pb2.EncodedPodResourcesList.FromString
