"""Reconcile arithmetic, with upstream's reconcile_test numbers (contract §7, §11)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from allocwatch.claims import Claim, ClaimSource, physical_device_id
from allocwatch.declaredload import DeclaredLoad
from allocwatch.profile import Device
from allocwatch.reconcile import MemoryReading, reading_for, reconcile
from tests.conftest import A100_APERTURE, A100_HALF

TWO = [Device(0, "GPU-aaa", 42949672960, 611319808), Device(1, "GPU-bbb", 42949672960, 611319808)]


def claim(device_id: str, pod: str = "p") -> Claim:
    return Claim("ns", pod, "c", "nvidia.com/gpu", device_id)


def test_no_claims_every_device_idle() -> None:
    rec = reconcile(TWO, [], 0.5)
    assert rec.readings == {
        0: MemoryReading(0, A100_APERTURE),
        1: MemoryReading(0, A100_APERTURE),
    }


def test_one_claim_moves_only_its_device() -> None:
    rec = reconcile(TWO, [claim("GPU-bbb")], 0.5)
    assert rec.readings[1] == MemoryReading(A100_HALF, A100_APERTURE - A100_HALF)
    assert rec.readings[0] == MemoryReading(0, A100_APERTURE)
    assert rec.claims_per_device == {0: 0, 1: 1}


@pytest.mark.parametrize("n", [2, 3, 17])
def test_claims_clamp_at_the_aperture(n: int) -> None:
    rec = reconcile(TWO, [claim("GPU-aaa", f"p{i}") for i in range(n)], 0.5)
    assert rec.readings[0] == MemoryReading(A100_APERTURE, 0)


def test_a_device_without_memory_has_claims_but_no_reading() -> None:
    devices = [*TWO, Device(2, "GPU-ccc", 0, 0, has_memory=False)]
    rec = reconcile(devices, [claim("GPU-ccc"), claim("GPU-ccc::1", "q")], 0.5)
    assert set(rec.readings) == {0, 1}
    assert rec.claims_per_device == {0: 0, 1: 0, 2: 2}
    assert rec.unknown_ids == ()


def test_unknown_ids_are_ignored_and_reported() -> None:
    rec = reconcile(TWO, [claim("GPU-does-not-exist")], 0.5)
    assert all(r.used_bytes == 0 for r in rec.readings.values())
    assert rec.unknown_ids == ("GPU-does-not-exist",)


def test_busy_then_empty_returns_to_idle() -> None:
    assert reconcile(TWO, [claim("GPU-aaa")], 0.5).readings[0].used_bytes == A100_HALF
    assert reconcile(TWO, [], 0.5).readings[0] == MemoryReading(0, A100_APERTURE)


def test_quarter_fraction() -> None:
    assert reconcile(TWO, [claim("GPU-aaa")], 0.25).readings[0].used_bytes == 10584588288


def test_replica_ids_count_against_the_physical_gpu() -> None:
    rec = reconcile(TWO, [claim("GPU-bbb::0", "a"), claim("GPU-bbb::1", "b")], 0.25)
    assert rec.readings[1].used_bytes == 2 * 10584588288
    assert rec.unknown_ids == ()


def test_a_replica_suffix_of_any_length_is_stripped() -> None:
    assert physical_device_id("GPU-a::12") == "GPU-a"
    assert physical_device_id("GPU-a") == "GPU-a"


def test_devices_sharing_a_uuid_both_count_its_claims() -> None:
    # upstream counts claims per uuid, then looks up each device's uuid
    same = [Device(i, "GPU-aaa", 42949672960, 611319808) for i in (0, 1)]
    rec = reconcile([*same, Device(2, "", 10, 0)], [claim("GPU-aaa")], 0.5)
    assert rec.claims_per_device == {0: 1, 1: 1, 2: 0}
    assert rec.readings[0] == rec.readings[1] == MemoryReading(A100_HALF, A100_APERTURE - A100_HALF)
    assert rec.unknown_ids == ()


def test_reserved_above_total_gives_zero_aperture() -> None:
    assert reading_for(Device(0, "x", 10, 20), 3, 0.5) == MemoryReading(0, 0)


def test_truncates_like_go() -> None:
    # float64(7) * 0.3 = 2.0999999999999996 -> 2 (truncation, not rounding)
    assert reading_for(Device(0, "x", 7, 0), 1, 0.3) == MemoryReading(2, 5)
    # per-claim truncation happens before multiplying by the claim count
    assert reading_for(Device(0, "x", 7, 0), 3, 0.3) == MemoryReading(6, 1)
    # exact halves: 3.5 truncates to 3 (rounding would give 4)
    assert reading_for(Device(0, "x", 7, 0), 1, 0.5) == MemoryReading(3, 4)
    # 3.5 per claim is 3, so two claims are 6 (7 if truncated after multiplying)
    assert reading_for(Device(0, "x", 10, 0), 2, 0.35) == MemoryReading(6, 4)


@pytest.mark.parametrize(
    ("total", "reserved", "half", "quarter"),
    [
        (85899345920, 1073741824, 42412802048, 21206401024),  # h100
        (206158430208, 1073741824, 102542344192, 51271172096),  # b200
        (309237645312, 1610612736, 153813516288, 76906758144),  # gb300
        (51539607552, 536870912, 25501368320, 12750684160),  # l40s
        (17179869184, 314572800, 8432648192, 4216324096),  # t4
    ],
)
def test_shipped_profiles_worked_numbers(
    total: int, reserved: int, half: int, quarter: int
) -> None:
    d = Device(0, "x", total, reserved)
    assert reading_for(d, 1, 0.5).used_bytes == half
    assert reading_for(d, 1, 0.25).used_bytes == quarter
    assert reading_for(d, 2, 0.5) == MemoryReading(total - reserved, 0)


# --- DRA -------------------------------------------------------------------------

FOUR = [Device(i, f"GPU-{i}", 42949672960, 611319808) for i in range(4)]


def dra(device_name: str, pod: str = "p", driver: str = "gpu.nvidia.com") -> Claim:
    return Claim("ns", pod, "c", driver, device_name, ClaimSource.DRA, "ns", "claim")


def test_a_dra_gpu_counts_on_the_device_of_that_index_without_minor_numbers() -> None:
    rec = reconcile(FOUR, [dra("gpu-2")], 0.5)
    assert rec.claims_per_device == {0: 0, 1: 0, 2: 1, 3: 0}
    assert rec.dra_claims_per_device == {0: 0, 1: 0, 2: 1, 3: 0}
    assert rec.readings[2] == MemoryReading(A100_HALF, A100_APERTURE - A100_HALF)


def test_a_dra_gpu_counts_on_the_device_of_that_minor_number() -> None:
    minors = [replace(d, minor_number=3 - d.index) for d in FOUR]
    rec = reconcile(minors, [dra("gpu-0"), dra("gpu-1", "q")], 0.5)
    assert rec.claims_per_device == {0: 0, 1: 0, 2: 1, 3: 1}


def test_a_mig_device_counts_on_its_parent_gpu() -> None:
    rec = reconcile(FOUR, [dra("gpu-1-mig-1g.5gb-19-0"), dra("gpu-1-mig-3g.20gb-9-4", "q")], 0.5)
    assert rec.claims_per_device[1] == 2
    assert rec.unknown_ids == ()


@pytest.mark.parametrize(
    "name",
    [
        "gpu-vfio-1",
        "gpu-9",
        "gpu-",
        "gpu-1x",
        "gpu-01-mig",
        "nic-1",
        "GPU-9",
        "gpu-01",
        "gpu-\uff11",
    ],
)
def test_a_dra_name_matching_no_device_is_unknown(name: str) -> None:
    rec = reconcile(FOUR, [dra(name)], 0.5)
    assert sum(rec.claims_per_device.values()) == 0
    assert rec.unknown_ids == (f"gpu.nvidia.com/{name}",)


def test_device_plugin_and_dra_claims_on_one_gpu_add_up_and_clamp() -> None:
    rec = reconcile(FOUR, [claim("GPU-0"), dra("gpu-0"), dra("gpu-0", "q")], 0.5)
    assert rec.claims_per_device[0] == 3
    assert rec.dra_claims_per_device[0] == 2
    assert rec.readings[0] == MemoryReading(A100_APERTURE, 0)


def test_devices_sharing_a_minor_number_both_count_its_claims() -> None:
    # As with a shared uuid: the engine would report both with that minor.
    shared = [replace(FOUR[0], minor_number=0), replace(FOUR[1], minor_number=0)]
    rec = reconcile(shared, [dra("gpu-0")], 0.5)
    assert rec.claims_per_device == {0: 1, 1: 1}


def test_a_dra_claim_on_a_device_without_uuid_or_memory_counts() -> None:
    devices = [Device(0, "", 0, 0, has_memory=False)]
    rec = reconcile(devices, [dra("gpu-0")], 0.5)
    assert rec.claims_per_device == {0: 1}
    assert rec.readings == {}


@pytest.mark.parametrize(
    "name",
    ["gpu-" + "9" * 4301, "gpu-" + "1" * 20, "gpu-1-mig-" + "x" * 1_000_000, "g" * 300],
)
def test_a_dra_name_too_long_to_be_a_device_is_unknown_unread(name: str) -> None:
    rec = reconcile(FOUR, [dra(name), dra("gpu-0")], 0.5)
    assert rec.claims_per_device == {0: 1, 1: 0, 2: 0, 3: 0}
    assert rec.unknown_ids == (f"gpu.nvidia.com/{name}",)


def test_the_largest_minor_number_still_matches() -> None:
    big = 2**63 - 1
    devices = [Device(0, "GPU-0", 80 << 30, 0, minor_number=big)]
    assert reconcile(devices, [dra(f"gpu-{big}")], 0.5).claims_per_device == {0: 1}


@pytest.mark.parametrize("spell", [str.lower, str.upper, str.title])
def test_a_dra_device_named_by_its_gpus_uuid_counts_on_it_in_any_case(
    spell: Callable[[str], str],
) -> None:
    """fake-gpu-operator's DRA plugin names each device by its GPU's uuid, lower-cased."""
    devices = [
        Device(i, f"GPU-ABCDEF0{i}-1234-5678-9abc-def012345678", 80 << 30, 0) for i in range(3)
    ]
    rec = reconcile(devices, [dra(spell(devices[2].uuid))], 0.5)
    assert rec.claims_per_device == {0: 0, 1: 0, 2: 1}
    assert rec.unknown_ids == ()


# ---- declared loads ----------------------------------------------------------------


def test_declared_memory_replaces_the_default_share_and_claims_still_add_up() -> None:
    device = Device(0, "GPU-0", 100 * 2**30, 0)
    claims = [claim("GPU-0", pod=p) for p in ("infer", "train", "plain")]
    loads = {
        ("ns", "infer"): DeclaredLoad(memory_bytes=30 * 2**30),
        ("ns", "train"): DeclaredLoad(memory_fraction=0.25),
    }
    rec = reconcile([device], claims, 0.1, loads)
    # 30 GiB + a quarter (25 GiB) + the default tenth (10 GiB, truncated as upstream does)
    want = 30 * 2**30 + 25 * 2**30 + int(float(100 * 2**30) * 0.1)
    assert rec.readings[0] == MemoryReading(want, 100 * 2**30 - want)
    assert rec.asked[0][claims[0]] == 30 * 2**30


def test_declared_memory_past_the_gpu_is_clamped_to_its_usable_memory() -> None:
    device = Device(0, "GPU-0", 80 * 2**30, 2**30)
    loads = {("ns", "big"): DeclaredLoad(memory_bytes=200 * 2**30)}
    rec = reconcile([device], [claim("GPU-0", pod="big"), claim("GPU-0")], 0.5, loads)
    assert rec.readings[0] == MemoryReading(79 * 2**30, 0)


def test_without_declared_memory_the_arithmetic_is_upstreams_byte_for_byte() -> None:
    device = Device(0, "x", 7, 0)  # 0.3 of 7 truncates to 2
    loads = {("ns", "p"): DeclaredLoad(utilization=(40, 40))}  # utilization only
    assert reconcile([device], [claim("x")] * 3, 0.3, loads).readings[0] == MemoryReading(6, 1)
