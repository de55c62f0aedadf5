"""Claims from a List response still in its wire bytes."""

from __future__ import annotations

import re
from collections.abc import Set

from allocwatch.claims import Claim
from allocwatch.kubeletapi.podresources.v1 import api_pb2


class ClaimDecoder:
    """One claim per (pod, container, device id), in List order, no de-duplication.

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
        """The claims of an encoded ListPodResourcesResponse; the list is the caller's.

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
        pod = api_pb2.PodResources.FromString(encoded)
        return [
            Claim(pod.namespace, pod.name, container.name, devices.resource_name, device_id)
            for container in pod.containers
            for devices in container.devices
            if devices.resource_name in self.resource_names
            for device_id in devices.device_ids
        ]


# The response's pods, each still encoded (EncodedPodResourcesList in
# protos/allocwatch/kubeletapi/podresources/v1/api.proto).
_parse_list = api_pb2.EncodedPodResourcesList.FromString
