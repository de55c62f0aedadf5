"""The advertised inventory: ids, replicas, health, and NVIDIA_VISIBLE_DEVICES."""

from __future__ import annotations

import pytest

from e2e.fakeplugin.devices import build_inventory, physical_uuid, visible_devices

U = ["GPU-a", "GPU-b"]


def test_one_device_per_uuid_by_default() -> None:
    devices = build_inventory(U)
    assert [(d.id, d.uuid, d.health) for d in devices] == [
        ("GPU-a", "GPU-a", "Healthy"),
        ("GPU-b", "GPU-b", "Healthy"),
    ]


def test_replicas_are_annotated_ids() -> None:
    assert [d.id for d in build_inventory(U, replicas=3)] == [
        "GPU-a::0",
        "GPU-a::1",
        "GPU-a::2",
        "GPU-b::0",
        "GPU-b::1",
        "GPU-b::2",
    ]


def test_unhealthy_by_uuid_covers_all_replicas_and_by_id_only_one() -> None:
    health = {d.id: d.healthy for d in build_inventory(U, 2, ["GPU-a", "GPU-b::1"])}
    assert health == {"GPU-a::0": False, "GPU-a::1": False, "GPU-b::0": True, "GPU-b::1": False}


@pytest.mark.parametrize(
    ("uuids", "replicas", "unhealthy", "message"),
    [
        (U, 0, [], "replicas"),
        ([], 1, [], "no GPU"),
        (["GPU-a", "GPU-a"], 1, [], "not unique"),
        (U, 1, ["GPU-c"], "unknown"),
        (U, 1, ["GPU-a::0"], "unknown"),
        (["GPU-" + "x" * 60], 2, [], "longer than 63"),
    ],
)
def test_rejects_bad_inventories(
    uuids: list[str], replicas: int, unhealthy: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build_inventory(uuids, replicas, unhealthy)


def test_visible_devices_are_physical_deduplicated_in_order() -> None:
    assert physical_uuid("GPU-a::7") == "GPU-a"
    assert visible_devices(["GPU-b::1", "GPU-a::0", "GPU-b::0", "GPU-a"]) == "GPU-b,GPU-a"
    assert visible_devices([]) == ""
