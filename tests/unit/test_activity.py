"""Utilization, power and temperature from the claims: the arithmetic and the bands."""

from __future__ import annotations

import itertools

import pytest

from allocwatch.activity import (
    DEFAULT_BUSY,
    IDLE,
    IDLE_UTILIZATION,
    Band,
    activity,
    combined,
    memory_band,
    process_utilization,
)
from allocwatch.profile import Device, Power, Thermal

# The a100 test profile's blocks (tests/data/a100.yaml)
A100_POWER = Power(idle=72000, limit=400000, minimum=100000, maximum=400000)
A100_THERMAL = Thermal(idle=33, target=83, slowdown=87, shutdown=92)
GPU = Device(0, "GPU-0", 80 << 30, 0, power=A100_POWER, thermal=A100_THERMAL)


def test_an_idle_gpu_reads_0_and_shows_the_profiles_static_power_and_temperature() -> None:
    got = activity(GPU, [])
    assert got.utilization == IDLE_UTILIZATION
    assert got.power is None and got.temperature is None  # null: the static idle values show
    assert got.left == {}


def test_the_idle_pattern_over_0_1_reads_exactly_0() -> None:
    # The engine's simulator: pattern idle samples [lo, lo + (hi - lo) // 4].
    lo, hi = IDLE_UTILIZATION["gpu_min"], IDLE_UTILIZATION["gpu_max"]
    assert IDLE_UTILIZATION["pattern"] == "idle" and (hi - lo) // 4 == 0 and lo == 0
    assert (hi, lo) != (0, 0)  # which the simulator would read as 0-100


def test_one_claim_reads_the_default_band_and_draws_and_warms_in_proportion() -> None:
    got = activity(GPU, [DEFAULT_BUSY])
    assert got.utilization == {
        "pattern": "steady",
        "gpu_min": 70,
        "gpu_max": 90,
        "memory_min": 30,
        "memory_max": 60,
    }
    # idle + u x (limit - idle): u is 0.7-0.9, so 301.6-367.2 W
    assert got.power == {"base_mw": 334400, "variance_mw": 32800}
    # idle + u x (target - idle): 68-78 °C, below the slowdown threshold (87)
    assert got.temperature == {"base_c": 73, "ramp_c": 0, "variance_c": 5}


def test_claims_on_one_gpu_add_up_as_independent_loads() -> None:
    assert combined([DEFAULT_BUSY]) == DEFAULT_BUSY
    assert combined([DEFAULT_BUSY, DEFAULT_BUSY]) == Band(91, 99)
    assert combined([Band(100, 100), DEFAULT_BUSY]) == Band(100, 100)
    assert combined([]) == IDLE


@pytest.mark.parametrize("bands", [[Band(a, b) for a, b in p] for p in [
    [(0, 0)], [(10, 20), (30, 40)], [(70, 90)] * 5, [(0, 0), (85, 85)], [(100, 100)] * 3,
]])  # fmt: skip
def test_more_claims_never_read_less_busy_and_never_above_100(bands: list[Band]) -> None:
    for n in range(1, len(bands) + 1):
        fewer, more = combined(bands[: n - 1]), combined(bands[:n])
        assert fewer.lo <= more.lo <= 100 and fewer.hi <= more.hi <= 100


def test_every_band_combines_within_0_100() -> None:
    for a, b in itertools.product(range(0, 101, 5), repeat=2):
        band = combined([Band(min(a, b), max(a, b))] * 3)
        assert 0 <= band.lo <= band.hi <= 100
        mem = memory_band(band)
        assert 0 <= mem.lo <= mem.hi <= 100
        assert (band.hi == 0) == (mem.hi == 0)  # never memory 0-0 beside a busy GPU


def test_allocated_but_not_computing_reads_idle() -> None:
    got = activity(GPU, [IDLE, IDLE])
    assert got.utilization == IDLE_UTILIZATION and got.power is None and got.temperature is None


def test_power_stays_within_the_profiles_min_and_max() -> None:
    low = Device(0, "g", 1, 0, power=Power(idle=12000, limit=70000, minimum=60000, maximum=70000))
    assert activity(low, [Band(1, 1)]).power == {"base_mw": 60000, "variance_mw": 0}
    high = Device(0, "g", 1, 0, power=Power(idle=50000, limit=900000, minimum=0, maximum=300000))
    assert activity(high, [Band(100, 100)]).power["base_mw"] == 300000  # type: ignore[index]


def test_temperature_stays_below_the_slowdown_threshold() -> None:
    hot = Device(0, "g", 1, 0, thermal=Thermal(idle=40, target=95, slowdown=80, shutdown=99))
    got = activity(hot, [Band(60, 100)]).temperature
    assert got is not None and got["base_c"] + got["variance_c"] <= 79


@pytest.mark.parametrize(
    ("device", "left"),
    [
        (Device(0, "g", 1, 0), {"power", "temperature"}),
        (Device(0, "g", 1, 0, power=A100_POWER._replace(idle=0), thermal=A100_THERMAL), {"power"}),
        (Device(0, "g", 1, 0, power=A100_POWER._replace(limit=0), thermal=A100_THERMAL), {"power"}),
        (
            Device(0, "g", 1, 0, power=A100_POWER, thermal=A100_THERMAL._replace(target=0)),
            {"temperature"},
        ),
    ],
)
def test_what_the_profile_cannot_give_is_left_alone(device: Device, left: set[str]) -> None:
    for bands in ([], [DEFAULT_BUSY]):
        got = activity(device, bands)
        assert set(got.left) == left
        assert got.utilization  # utilization needs nothing from the profile
        if "power" in left:
            assert got.power is None
        if "temperature" in left:
            assert got.temperature is None


def test_each_process_holds_its_share_of_its_gpus_utilization() -> None:
    assert process_utilization([DEFAULT_BUSY]) == [(80, 45)]
    two = process_utilization([DEFAULT_BUSY, DEFAULT_BUSY])
    assert two == [(47, 26), (47, 26)]  # the GPU reads 91-99, memory 39-66
    mixed = process_utilization([Band(20, 20), Band(80, 80), IDLE])
    assert mixed[2] == (0, 0) and mixed[0][0] < mixed[1][0]
    for bands in ([DEFAULT_BUSY] * 7, [Band(5, 95), Band(40, 60)]):
        gpu = combined(bands)
        assert sum(sm for sm, _ in process_utilization(bands)) <= (gpu.lo + gpu.hi) / 2


def test_a_band_prints_as_it_is_written() -> None:
    assert str(DEFAULT_BUSY) == "70-90" and str(Band(85, 85)) == "85" and str(IDLE) == "0"
