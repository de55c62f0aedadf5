"""The devices and API objects built from a profile (no I/O beyond reading it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocwatch.profile import Device
from e2e.fakedra.inventory import DraDevice, build_inventory, load_inventory, minor_numbers
from e2e.fakedra.resources import device_class, resource_slice, same_devices
from tests.conftest import A100, A100_UUIDS
from tests.infra.fakedra.conftest import PROFILE, UUIDS


def test_index_stands_in_when_the_profile_gives_no_minor_numbers() -> None:
    devices = load_inventory(PROFILE)
    # four-gpus.yaml lists its devices out of index order; the slice is in minor order
    assert devices == [DraDevice(f"gpu-{i}", UUIDS[i], i, i) for i in range(4)]
    assert [d.name for d in load_inventory(A100)] == [f"gpu-{i}" for i in range(8)]
    assert [d.uuid for d in load_inventory(A100)] == A100_UUIDS


def test_minor_numbers_name_the_devices(tmp_path: Path) -> None:
    profile = tmp_path / "minors.yaml"
    text = PROFILE.read_text()
    for i in range(4):
        text = text.replace(f"  - index: {i}\n", f"  - index: {i}\n    minor_number: {7 - i}\n")
    profile.write_text(text)
    assert minor_numbers({"devices": [{"index": 1, "minor_number": 6}, "junk"]}) == {1: 6}
    devices = load_inventory(profile)
    assert devices == [DraDevice(f"gpu-{7 - i}", UUIDS[i], 7 - i, i) for i in (3, 2, 1, 0)]


def test_rejects_duplicate_minors_and_empty_profiles() -> None:
    a, b = Device(0, "GPU-a", 1, 0), Device(1, "GPU-b", 1, 0)
    with pytest.raises(ValueError, match="not unique"):
        build_inventory([a, b], {0: 5, 1: 5})
    with pytest.raises(ValueError, match="no GPU UUIDs"):
        build_inventory([Device(0, "", 1, 0)], {})


def test_slice_and_class_content() -> None:
    devices = [DraDevice("gpu-0", "GPU-a", 0, 0), DraDevice("gpu-1", "GPU-b", 1, 1)]
    s = resource_slice("gpu.nvidia.com", "node-a", devices, 3)
    assert s["apiVersion"] == "resource.k8s.io/v1"
    assert s["kind"] == "ResourceSlice"
    assert s["metadata"]["name"] == "node-a-gpu.nvidia.com"
    assert s["spec"]["driver"] == "gpu.nvidia.com"
    assert s["spec"]["nodeName"] == "node-a"
    assert s["spec"]["pool"] == {"name": "node-a", "generation": 3, "resourceSliceCount": 1}
    assert s["spec"]["devices"][1] == {
        "name": "gpu-1",
        "attributes": {"uuid": {"string": "GPU-b"}, "minor": {"int": 1}, "index": {"int": 1}},
    }
    c = device_class("gpu.nvidia.com")
    assert c["kind"] == "DeviceClass"
    assert c["metadata"]["name"] == "gpu.nvidia.com"
    assert c["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]


def test_same_devices_ignores_generation_and_server_defaults() -> None:
    devices = [DraDevice("gpu-0", "GPU-a", 0, 0)]
    wanted = resource_slice("d", "n", devices, 2)["spec"]
    published = resource_slice("d", "n", devices, 1)["spec"]
    published["perDeviceNodeSelection"] = None
    assert same_devices(published, wanted)
    other = resource_slice("d", "n", [DraDevice("gpu-0", "GPU-b", 0, 0)], 1)["spec"]
    assert not same_devices(other, wanted)
    assert not same_devices(None, wanted)
