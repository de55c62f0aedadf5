"""Claims from a List response (upstream podresources_test cases)."""

from __future__ import annotations

import random
from collections.abc import Callable, Set
from typing import Any

import pytest

from allocwatch import claimdecoder
from allocwatch.claimdecoder import ClaimDecoder
from allocwatch.claims import Claim, ClaimSource, physical_device_id
from allocwatch.kubeletapi.podresources.v1 import api_pb2
from allocwatch.podresources import (
    DEFAULT_DRA_DRIVERS,
    DEFAULT_RESOURCE_NAMES,
    PodResourcesClient,
)
from devtools.podresources import (
    FakePodResourcesLister,
    build_response,
    dra_pod,
    dra_resource,
    gpu_pod,
)

NAMES = frozenset(DEFAULT_RESOURCE_NAMES)
DRIVERS = frozenset(DEFAULT_DRA_DRIVERS)

ClaimsOf = Callable[..., list[Claim]]


def _via_encoded(
    resp: api_pb2.ListPodResourcesResponse, names: Set[str], drivers: Set[str] = DRIVERS
) -> list[Claim]:
    return list(ClaimDecoder(names, drivers)(resp.SerializeToString()))


def _reference_claims(
    resp: api_pb2.ListPodResourcesResponse, names: Set[str], drivers: Set[str] = DRIVERS
) -> list[Claim]:
    """The claims by the letter of the API: every pod decoded, nothing skipped or reused;
    a container's DRA devices once per (claim, device, share id)."""
    claims: list[Claim] = []
    for pod in resp.pod_resources:
        for container in pod.containers:
            claims += [
                Claim(pod.namespace, pod.name, container.name, devices.resource_name, device_id)
                for devices in container.devices
                if devices.resource_name in names
                for device_id in devices.device_ids
            ]
            dra: list[Claim] = []
            for dynamic in container.dynamic_resources:
                for res in dynamic.claim_resources:
                    claim = Claim(
                        pod.namespace,
                        pod.name,
                        container.name,
                        res.driver_name,
                        res.device_name,
                        ClaimSource.DRA,
                        dynamic.claim_namespace,
                        dynamic.claim_name,
                        res.pool_name,
                        res.share_id if res.HasField("share_id") else None,
                    )
                    if res.driver_name in drivers and res.device_name and claim not in dra:
                        dra.append(claim)
            claims += dra
    return claims


@pytest.fixture(params=["decoder", "listed"])
def claims_of(request: pytest.FixtureRequest) -> ClaimsOf:
    """Every case holds for the decoder alone and for a real List through the client."""
    if request.param == "decoder":
        return _via_encoded
    kubelet: FakePodResourcesLister = request.getfixturevalue("kubelet")

    def listed(
        resp: api_pb2.ListPodResourcesResponse, names: Set[str], drivers: Set[str] = DRIVERS
    ) -> list[Claim]:
        kubelet.set_raw_pods([pod.SerializeToString() for pod in resp.pod_resources])
        client = PodResourcesClient(kubelet.socket_path, names, dra_drivers=drivers)
        try:
            return list(client.list_claims())
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
    drivers = ["gpu.nvidia.com", "gpu.example.com", ""]

    def devices() -> dict[str, Any]:
        ids = [f"GPU-{rng.randrange(8)}::{r}" for r in range(rng.randrange(3))]
        return {"resource_name": rng.choice(resources), "device_ids": ids}

    def dynamic() -> dict[str, Any]:
        # few names, so that repeats within a container occur
        resources = [
            dra_resource(
                f"gpu-{rng.randrange(3)}",
                driver=rng.choice(drivers),
                cdi_devices=[f"k8s.gpu.nvidia.com/claim=u-gpu-{n}" for n in range(k + 1)],
                share_id=rng.choice([None, "s1"]),
            )
            for k in range(rng.randrange(3))
        ]
        claim = f"claim-{rng.randrange(3)}"
        return {"claim_name": claim, "claim_namespace": "ns", "claim_resources": resources}

    containers = [
        {
            "name": f"c{c}",
            "devices": [devices() for _ in range(rng.randrange(3))],
            "dynamic_resources": [dynamic() for _ in range(rng.choice([0, 0, 1, 2]))],
        }
        for c in range(rng.randrange(1, 4))
    ]
    return {"namespace": f"ns{i % 5}", "name": f"pod-{i}", "containers": containers}


def test_encoded_decoding_matches_full_decoding_on_a_mixed_node() -> None:
    rng = random.Random(7)
    resp = build_response([_random_pod(rng, i) for i in range(300)])
    for names in (NAMES, frozenset({"nvidia.com/gpu"}), frozenset({"amd.com/gpu"}), frozenset()):
        for drivers in (DRIVERS, frozenset({"gpu.example.com"}), frozenset()):
            assert _via_encoded(resp, names, drivers) == _reference_claims(resp, names, drivers)
    assert len(_reference_claims(resp, NAMES)) > 100
    assert len(_reference_claims(resp, frozenset())) > 20  # DRA claims alone


def test_one_decoder_across_changing_lists_matches_full_decoding() -> None:
    # The decoder remembers the previous List's pods; pods that change,
    # appear, vanish or repeat must still come out exactly as decoded afresh.
    rng = random.Random(11)
    pods = [_random_pod(rng, i) for i in range(60)]
    decode = ClaimDecoder(NAMES, DRIVERS)
    for _ in range(40):
        for _ in range(rng.randrange(6)):
            pods[rng.randrange(len(pods))] = _random_pod(rng, rng.randrange(1000))
        listed = rng.sample(pods, rng.randrange(len(pods))) + pods[:2]  # some pods twice
        resp = build_response(listed)
        wanted = _reference_claims(resp, NAMES)
        assert list(decode(resp.SerializeToString())) == wanted
        assert list(decode(resp.SerializeToString())) == wanted  # the same List again


def test_an_unchanged_list_is_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    pods = [_random_pod(rng, i) for i in range(30)]
    decode = ClaimDecoder(NAMES, DRIVERS)
    parsed: list[bytes] = []
    real_parse = claimdecoder._parse_list
    monkeypatch.setattr(
        claimdecoder, "_parse_list", lambda wire: parsed.append(wire) or real_parse(wire)
    )
    wire = build_response(pods).SerializeToString()
    first = decode(wire)
    again = decode(bytes(wire))  # equal bytes, another object
    assert again is first  # unchanged: the caller can tell without comparing
    assert list(again) == _reference_claims(build_response(pods), NAMES)
    assert len(parsed) == 1
    changed = build_response(pods[::-1])
    assert list(decode(changed.SerializeToString())) == _reference_claims(changed, NAMES)
    assert list(decode(changed.SerializeToString())) != list(again)
    assert len(parsed) == 2


# --- DRA -----------------------------------------------------------------------


def _dra_claim(pod: str, device: str, claim: str = "c1", **kw: Any) -> Claim:
    fields: dict[str, Any] = {
        "namespace": "ns",
        "pod": pod,
        "container": "main",
        "resource_name": "gpu.nvidia.com",
        "device_id": device,
        "source": ClaimSource.DRA,
        "claim_namespace": "ns",
        "claim_name": claim,
        "pool": "node-1",
    }
    fields.update(kw)
    return Claim(**fields)


def test_a_dra_claim_names_its_driver_pool_device_and_claim(claims_of: ClaimsOf) -> None:
    resp = build_response([dra_pod("ns", "p", "c1", [dra_resource("gpu-3")])])
    assert claims_of(resp, NAMES) == [_dra_claim("p", "gpu-3")]


def test_cumulative_cdi_ids_are_never_mapped_to_devices(claims_of: ClaimsOf) -> None:
    # The k-th entry of one driver carries the CDI ids of devices 1..k.
    cdi = [f"k8s.gpu.nvidia.com/claim=uid-gpu-{n}" for n in (0, 1, 2)]
    resources = [
        dra_resource("gpu-0", cdi_devices=cdi[:1]),
        dra_resource("gpu-1", cdi_devices=cdi[:2]),
        dra_resource("gpu-2", cdi_devices=cdi[:3]),
    ]
    resp = build_response([dra_pod("ns", "p", "c1", resources)])
    assert [c.device_id for c in claims_of(resp, NAMES)] == ["gpu-0", "gpu-1", "gpu-2"]


def test_a_claim_with_devices_of_two_drivers_counts_the_watched_ones(claims_of: ClaimsOf) -> None:
    resources = [
        dra_resource("gpu-0"),
        dra_resource("nic-0", driver="net.example.com"),
        dra_resource("gpu-1"),
    ]
    resp = build_response([dra_pod("ns", "p", "c1", resources)])
    assert [c.device_id for c in claims_of(resp, NAMES)] == ["gpu-0", "gpu-1"]
    both = DRIVERS | {"net.example.com"}
    assert [(c.resource_name, c.device_id) for c in claims_of(resp, NAMES, both)] == [
        ("gpu.nvidia.com", "gpu-0"),
        ("net.example.com", "nic-0"),
        ("gpu.nvidia.com", "gpu-1"),
    ]
    assert claims_of(resp, NAMES, frozenset({"gpu.example.com"})) == []


def test_a_claim_shared_by_two_pods_counts_once_per_pod(claims_of: ClaimsOf) -> None:
    resp = build_response(
        [
            dra_pod("ns", "a", "shared", [dra_resource("gpu-1")]),
            dra_pod("ns", "b", "shared", [dra_resource("gpu-1")]),
        ]
    )
    assert claims_of(resp, NAMES) == [
        _dra_claim("a", "gpu-1", "shared"),
        _dra_claim("b", "gpu-1", "shared"),
    ]


def test_one_claim_per_container_claim_device_and_share_id(claims_of: ClaimsOf) -> None:
    # A container naming one claim twice (two requests) is listed twice; a
    # device shared out twice (two share ids) is two claims.
    twice = {
        "claim_name": "c1",
        "claim_namespace": "ns",
        "claim_resources": [dra_resource("gpu-0"), dra_resource("gpu-1")],
    }
    shares = {
        "claim_name": "c2",
        "claim_namespace": "ns",
        "claim_resources": [
            dra_resource("gpu-2", share_id="a"),
            dra_resource("gpu-2", share_id="b"),
            dra_resource("gpu-2", share_id="a"),
        ],
    }
    pod = {
        "namespace": "ns",
        "name": "p",
        "containers": [
            {"name": "main", "dynamic_resources": [twice, twice, shares]},
            {"name": "side", "dynamic_resources": [twice]},
        ],
    }
    claims = claims_of(build_response([pod]), NAMES)
    assert [(c.container, c.claim_name, c.device_id, c.share_id) for c in claims] == [
        ("main", "c1", "gpu-0", None),
        ("main", "c1", "gpu-1", None),
        ("main", "c2", "gpu-2", "a"),
        ("main", "c2", "gpu-2", "b"),
        ("side", "c1", "gpu-0", None),
        ("side", "c1", "gpu-1", None),
    ]


def test_mig_and_unknown_device_names_are_listed_as_given(claims_of: ClaimsOf) -> None:
    names = ["gpu-1-mig-1g.5gb-19-0", "gpu-vfio-2", "gpu-0"]
    resp = build_response([dra_pod("ns", "p", "c1", [dra_resource(n) for n in names])])
    assert [c.device_id for c in claims_of(resp, NAMES)] == names


def test_a_dra_only_pod_passes_the_byte_filter(claims_of: ClaimsOf) -> None:
    # No device-plugin resource is watched and the pod has none: only the
    # driver's name can make the filter decode it.
    resp = build_response([dra_pod("ns", "p", "c1", [dra_resource("gpu-0")])])
    assert claims_of(resp, frozenset()) == [_dra_claim("p", "gpu-0")]
    assert claims_of(resp, frozenset(), frozenset()) == []


def test_device_plugin_and_dra_claims_of_one_container(claims_of: ClaimsOf) -> None:
    pod = dra_pod("ns", "p", "c1", [dra_resource("gpu-0")])
    pod["containers"][0]["devices"] = [{"resource_name": "nvidia.com/gpu", "device_ids": ["G-0"]}]
    claims = claims_of(build_response([pod]), NAMES)
    assert [(c.source, c.device_id) for c in claims] == [
        (ClaimSource.DEVICE_PLUGIN, "G-0"),
        (ClaimSource.DRA, "gpu-0"),
    ]


def test_entries_without_driver_or_device_names_are_counted_not_claimed() -> None:
    # What a kubelet before 1.31 sends: CDI ids only. NVIDIA's CDI ids contain
    # the driver's name, so the byte filter still decodes the pod.
    old = dra_resource("", driver="", pool="", cdi_devices=["k8s.gpu.nvidia.com/claim=u-gpu-0"])
    resp = build_response([dra_pod("ns", "p", "c1", [old, old]), gpu_pod("ns", "q", ["G-1"])])
    decode = ClaimDecoder(NAMES, DRIVERS)
    assert [c.pod for c in decode(resp.SerializeToString())] == ["q"]
    assert decode.unnamed_dra_entries == 2
    reordered = build_response([gpu_pod("ns", "q", ["G-1"]), dra_pod("ns", "p", "c1", [old])])
    decode(reordered.SerializeToString())
    assert decode.unnamed_dra_entries == 1
    decode(build_response([gpu_pod("ns", "q", ["G-1"])]).SerializeToString())
    assert decode.unnamed_dra_entries == 0
