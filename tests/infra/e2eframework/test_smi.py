"""The real stack's reader: nvidia-smi's CSV, and the rows the profile implies."""

from __future__ import annotations

import pytest

from allocwatch.profile import Device
from e2e.framework.expected import Expectation
from e2e.framework.smi import SmiRow, expected_rows, parse_rows

MIB = 2**20
# nvml-mock's t4 profile: 16384 MiB, 300 MiB reserved; the third has no memory block.
T4 = [
    Device(0, "GPU-a", 16384 * MIB, 300 * MIB),
    Device(1, "GPU-b", 16384 * MIB, 300 * MIB),
    Device(2, "GPU-c", 16384 * MIB, 300 * MIB, has_memory=False),
]


def test_rows_parse_as_nvidia_smi_prints_them() -> None:
    csv = "GPU-a, 8042, 8042, 16384\nGPU-b, 0, 16084, 16384\n\n"
    assert parse_rows(csv) == [SmiRow("GPU-a", 8042, 8042, 16384), SmiRow("GPU-b", 0, 16084, 16384)]


def test_a_row_that_is_not_four_numbers_fails() -> None:
    with pytest.raises(ValueError):
        parse_rows("GPU-a, [N/A], 0, 16384")


def test_expected_rows_follow_the_contract_arithmetic() -> None:
    expectation = Expectation(T4, 0.5)
    assert expected_rows(expectation, {}) == [
        SmiRow("GPU-a", 0, 16084, 16384),
        SmiRow("GPU-b", 0, 16084, 16384),
    ]
    # one claim: half the aperture; two: all of it, clamped; a GPU without memory: no row
    assert expected_rows(expectation, {"GPU-a": 1, "GPU-b": 2, "GPU-c": 1}) == [
        SmiRow("GPU-a", 8042, 8042, 16384),
        SmiRow("GPU-b", 16084, 0, 16384),
    ]
