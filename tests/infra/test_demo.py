"""make demo's node: nvml-mock's profile cut to one GPU, which NVIDIA's plugin time-slices."""

from __future__ import annotations

from hack.demo import one_gpu


def _device(i: int) -> dict[str, object]:
    return {"index": i, "uuid": f"GPU-{i}", "pci": {"bus_id": f"0000:{i}0:00.0"}, "minor_number": i}


BUSES = [f"0000:{i}0:00.0" for i in range(4)]


def test_one_gpu_keeps_the_first_device_and_only_its_pcie_entry() -> None:
    profile = {
        "version": "1.0",
        "device_defaults": {"name": "Tesla T4"},
        "devices": [_device(i) for i in range(4)],
        "pcie_topology": {"root_complexes": [{"id": "pci0000:00", "devices": BUSES}]},
    }
    cut = one_gpu(profile)
    assert cut["devices"] == [_device(0)]
    assert cut["pcie_topology"]["root_complexes"][0]["devices"] == ["0000:00:00.0"]
    assert cut["device_defaults"] == {"name": "Tesla T4"}
    assert profile["pcie_topology"]["root_complexes"][0]["devices"] == BUSES, "left as it was"


def test_one_gpu_needs_no_pcie_topology() -> None:
    assert one_gpu({"devices": [_device(0), _device(1)]}) == {"devices": [_device(0)]}
