"""Claims from a List response (upstream podresources_test cases)."""

from __future__ import annotations

import random
from collections.abc import Callable, Set
from typing import Any

import pytest

from allocwatch import claimdecoder
from allocwatch.claimdecoder import ClaimDecoder
from allocwatch.claims import Claim, physical_device_id
from allocwatch.kubeletapi.podresources.v1 import api_pb2
from allocwatch.podresources import DEFAULT_RESOURCE_NAMES, PodResourcesClient
from fakekubelet import FakeKubelet, build_response, gpu_pod

NAMES = frozenset(DEFAULT_RESOURCE_NAMES)

ClaimsOf = Callable[[api_pb2.ListPodResourcesResponse, Set[str]], list[Claim]]


def _via_encoded(resp: api_pb2.ListPodResourcesResponse, names: Set[str]) -> list[Claim]:
    return ClaimDecoder(names)(resp.SerializeToString())


def _reference_claims(resp: api_pb2.ListPodResourcesResponse, names: Set[str]) -> list[Claim]:
    """The claims by the letter of the API: every pod decoded, nothing skipped or reused."""
    return [
        Claim(pod.namespace, pod.name, container.name, devices.resource_name, device_id)
        for pod in resp.pod_resources
        for container in pod.containers
        for devices in container.devices
        if devices.resource_name in names
        for device_id in devices.device_ids
    ]


@pytest.fixture(params=["decoder", "listed"])
def claims_of(request: pytest.FixtureRequest) -> ClaimsOf:
    """Every case holds for the decoder alone and for a real List through the client."""
    if request.param == "decoder":
        return _via_encoded
    kubelet: FakeKubelet = request.getfixturevalue("kubelet")

    def listed(resp: api_pb2.ListPodResourcesResponse, names: Set[str]) -> list[Claim]:
        kubelet.set_raw_pods([pod.SerializeToString() for pod in resp.pod_resources])
        client = PodResourcesClient(kubelet.socket_path, names)
        try:
            return client.list_claims()
        finally:
            client.close()

    return listed


def test_one_gpu_claim(claims_of: ClaimsOf) -> None:
    resp = build_response([gpu_pod("ml", "trainer", ["GPU-aaa"], container="app")])
    assert claims_of(resp, NAMES) == [Claim("ml", "trainer", "app", "nvidia.com/gpu", "GPU-aaa")]


def test_other_resources_are_not_claims(claims_of: ClaimsOf) -> None:
    resp = build_response(
        [
            gpu_pod("ns", "a", ["net-0"], resource="intel.com/sriov_netdevice"),
            gpu_pod("ns", "b", ["amd-0"], resource="amd.com/gpu"),
        ]
    )
    assert claims_of(resp, NAMES) == []


def test_shared_gpu_counts_once_per_pod_in_order(claims_of: ClaimsOf) -> None:
    resp = build_response([gpu_pod("ns", "a", ["GPU-shared"]), gpu_pod("ns", "b", ["GPU-shared"])])
    assert [c.pod for c in claims_of(resp, NAMES)] == ["a", "b"]


def test_every_container_and_no_deduplication(claims_of: ClaimsOf) -> None:
    pod = {
        "namespace": "ns",
        "name": "p",
        "containers": [
            {
                "name": "c1",
                "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-x", "GPU-y"]}],
            },
            {
                "name": "c2",
                "devices": [
                    {
                        "resource_name": "nvidia.com/gpu.shared",
                        "device_ids": ["GPU-x::0", "GPU-x::1"],
                    }
                ],
            },
            {"name": "empty", "devices": []},
        ],
    }
    claims = claims_of(build_response([pod]), NAMES)
    assert [(c.container, c.device_id) for c in claims] == [
        ("c1", "GPU-x"),
        ("c1", "GPU-y"),
        ("c2", "GPU-x::0"),
        ("c2", "GPU-x::1"),
    ]
    assert [physical_device_id(c.device_id) for c in claims] == ["GPU-x", "GPU-y", "GPU-x", "GPU-x"]


def test_resource_set_is_configurable(claims_of: ClaimsOf) -> None:
    resp = build_response([gpu_pod("ns", "p", ["GPU-x::3"], resource="nvidia.com/gpu.shared")])
    assert claims_of(resp, frozenset({"nvidia.com/gpu"})) == []
    assert len(claims_of(resp, NAMES)) == 1


def test_empty_response(claims_of: ClaimsOf) -> None:
    assert claims_of(build_response([]), NAMES) == []


def test_a_pod_that_only_mentions_a_watched_name_holds_no_claim(claims_of: ClaimsOf) -> None:
    # Its bytes contain "nvidia.com/gpu", so the encoded path decodes it.
    resp = build_response(
        [
            gpu_pod("nvidia.com/gpu", "nvidia.com/gpu.shared", ["nvidia.com/gpu"], "example.com/x"),
            gpu_pod("ns", "gpu-user", ["GPU-a"]),
        ]
    )
    assert [c.pod for c in claims_of(resp, NAMES)] == ["gpu-user"]


def _random_pod(rng: random.Random, i: int) -> dict[str, Any]:
    resources = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "example.com/nic", "amd.com/gpu"]

    def devices() -> dict[str, Any]:
        ids = [f"GPU-{rng.randrange(8)}::{r}" for r in range(rng.randrange(3))]
        return {"resource_name": rng.choice(resources), "device_ids": ids}

    containers = [
        {"name": f"c{c}", "devices": [devices() for _ in range(rng.randrange(3))]}
        for c in range(rng.randrange(1, 4))
    ]
    return {"namespace": f"ns{i % 5}", "name": f"pod-{i}", "containers": containers}


def test_encoded_decoding_matches_full_decoding_on_a_mixed_node() -> None:
    rng = random.Random(7)
    resp = build_response([_random_pod(rng, i) for i in range(300)])
    for names in (NAMES, frozenset({"nvidia.com/gpu"}), frozenset({"amd.com/gpu"}), frozenset()):
        assert _via_encoded(resp, names) == _reference_claims(resp, names)
    assert len(_reference_claims(resp, NAMES)) > 100


def test_one_decoder_across_changing_lists_matches_full_decoding() -> None:
    # The decoder remembers the previous List's pods; pods that change,
    # appear, vanish or repeat must still come out exactly as decoded afresh.
    rng = random.Random(11)
    pods = [_random_pod(rng, i) for i in range(60)]
    decode = ClaimDecoder(NAMES)
    for _ in range(40):
        for _ in range(rng.randrange(6)):
            pods[rng.randrange(len(pods))] = _random_pod(rng, rng.randrange(1000))
        listed = rng.sample(pods, rng.randrange(len(pods))) + pods[:2]  # some pods twice
        resp = build_response(listed)
        wanted = _reference_claims(resp, NAMES)
        assert decode(resp.SerializeToString()) == wanted
        assert decode(resp.SerializeToString()) == wanted  # the same List again


def test_an_unchanged_list_is_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    pods = [_random_pod(rng, i) for i in range(30)]
    decode = ClaimDecoder(NAMES)
    parsed: list[bytes] = []
    real_parse = claimdecoder._parse_list
    monkeypatch.setattr(
        claimdecoder, "_parse_list", lambda wire: parsed.append(wire) or real_parse(wire)
    )
    wire = build_response(pods).SerializeToString()
    first = decode(wire)
    first.append(first[0])  # the caller's list is its own
    again = decode(bytes(wire))  # equal bytes, another object
    assert again == _reference_claims(build_response(pods), NAMES)
    assert len(parsed) == 1
    changed = build_response(pods[::-1])
    assert decode(changed.SerializeToString()) == _reference_claims(changed, NAMES) != again
    assert len(parsed) == 2
