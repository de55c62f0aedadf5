"""Claims from a List response (upstream podresources_test cases)."""

from __future__ import annotations

from allocwatch.podresources import DEFAULT_RESOURCE_NAMES, Claim, claims_from_response
from tests.support.fakekubelet import build_response, gpu_pod

NAMES = frozenset(DEFAULT_RESOURCE_NAMES)


def test_one_gpu_claim() -> None:
    resp = build_response([gpu_pod("ml", "trainer", ["GPU-aaa"], container="app")])
    assert claims_from_response(resp, NAMES) == [
        Claim("ml", "trainer", "app", "nvidia.com/gpu", "GPU-aaa")
    ]


def test_other_resources_are_not_claims() -> None:
    resp = build_response(
        [
            gpu_pod("ns", "a", ["net-0"], resource="intel.com/sriov_netdevice"),
            gpu_pod("ns", "b", ["amd-0"], resource="amd.com/gpu"),
        ]
    )
    assert claims_from_response(resp, NAMES) == []


def test_shared_gpu_counts_once_per_pod_in_order() -> None:
    resp = build_response([gpu_pod("ns", "a", ["GPU-shared"]), gpu_pod("ns", "b", ["GPU-shared"])])
    assert [c.pod for c in claims_from_response(resp, NAMES)] == ["a", "b"]


def test_every_container_and_no_deduplication() -> None:
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
    claims = claims_from_response(build_response([pod]), NAMES)
    assert [(c.container, c.device_id) for c in claims] == [
        ("c1", "GPU-x"),
        ("c1", "GPU-y"),
        ("c2", "GPU-x::0"),
        ("c2", "GPU-x::1"),
    ]
    assert [c.physical_id for c in claims] == ["GPU-x", "GPU-y", "GPU-x", "GPU-x"]


def test_resource_set_is_configurable() -> None:
    resp = build_response([gpu_pod("ns", "p", ["GPU-x::3"], resource="nvidia.com/gpu.shared")])
    assert claims_from_response(resp, frozenset({"nvidia.com/gpu"})) == []
    assert len(claims_from_response(resp, NAMES)) == 1


def test_empty_response() -> None:
    assert claims_from_response(build_response([]), NAMES) == []
