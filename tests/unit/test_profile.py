"""Profile parsing follows the engine's rules (contract §2)."""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path

import pytest

from allocwatch import profilesource
from allocwatch.profile import Device, Power, ProfileError, Thermal, parse_profile
from allocwatch.profilesource import ProfileSource
from tests.conftest import A100_UUIDS

HEADER = 'version: "1.0"\nsystem:\n  driver_version: "550.163.01"\n'


def test_real_a100_profile(a100: list[Device]) -> None:
    assert len(a100) == 8
    assert a100[0] == Device(
        0,
        A100_UUIDS[0],
        42949672960,
        611319808,
        power=Power(idle=72000, limit=400000, minimum=100000, maximum=400000),
        thermal=Thermal(idle=33, target=83, slowdown=87, shutdown=92),
    )
    uuids = [d.uuid for d in a100]
    assert all(uuids) and len(set(uuids)) == 8


def test_count_is_list_length_not_max_index() -> None:
    devices = parse_profile(
        HEADER
        + "device_defaults: {memory: {total_bytes: 100, reserved_bytes: 10}}\n"
        + "devices:\n  - {index: 5, uuid: GPU-5}\n  - {index: 0, uuid: GPU-0}\n"
    )
    # two entries -> indices 0 and 1; index 1 has no entry, so no uuid
    assert [(d.index, d.uuid) for d in devices] == [(0, "GPU-0"), (1, "")]


def test_no_devices_means_eight_and_num_devices_overrides() -> None:
    base = HEADER + "device_defaults: {memory: {total_bytes: 100}}\n"
    assert len(parse_profile(base)) == 8
    assert len(parse_profile(base.replace("system:\n", "system:\n  num_devices: 3\n"))) == 3


def test_engine_serves_at_most_eight() -> None:
    text = HEADER.replace("system:\n", "system:\n  num_devices: 12\n")
    text += "device_defaults: {memory: {total_bytes: 100}}\n"
    assert [d.index for d in parse_profile(text)] == list(range(8))


def test_per_device_memory_replaces_defaults_wholesale() -> None:
    devices = parse_profile(
        HEADER
        + "device_defaults: {memory: {total_bytes: 1000, reserved_bytes: 100}}\n"
        + "devices:\n"
        + "  - {index: 0, uuid: GPU-0, memory: {total_bytes: 500}}\n"
        + "  - {index: 1, uuid: GPU-1}\n"
    )
    assert devices[0] == Device(0, "GPU-0", 500, 0)  # reserved not inherited
    assert devices[1] == Device(1, "GPU-1", 1000, 100)


def test_devices_without_memory_are_kept_without_memory() -> None:
    devices = parse_profile(
        HEADER
        + "devices:\n  - {index: 0, uuid: GPU-0}\n"
        + "  - {index: 1, uuid: GPU-1, memory: {total_bytes: 8, reserved_bytes: 2}}\n"
    )
    assert devices == [Device(0, "GPU-0", 0, 0, has_memory=False), Device(1, "GPU-1", 8, 2)]


def test_usable_memory_over_2_pow_53_is_refused() -> None:
    """The engine reads our byte counts as float64 (contract §3): 2^53 + 1 would become 2^53."""
    over = 2**53 + 1
    defaults = HEADER + f"device_defaults: {{memory: {{total_bytes: {over}}}}}\n"
    with pytest.raises(ProfileError, match=r"device 0: device_defaults.memory leaves .* 2\^53"):
        parse_profile(defaults)
    entry = HEADER + f"devices:\n  - {{index: 0, memory: {{total_bytes: {over}}}}}\n"
    with pytest.raises(ProfileError, match=r"device 0: devices\[0\].memory leaves"):
        parse_profile(entry)
    # What counts is what is published: total less reserved.
    reserved = HEADER + f"device_defaults: {{memory: {{total_bytes: {over}, reserved_bytes: 1}}}}\n"
    assert parse_profile(reserved)[0] == Device(0, "", over, 1)
    exact = HEADER + f"device_defaults: {{memory: {{total_bytes: {2**53}}}}}\n"
    assert parse_profile(exact)[0].total_bytes == 2**53


def test_field_names_match_case_insensitively_and_unknown_keys_are_ignored() -> None:
    devices = parse_profile(
        'Version: "1.0"\nSystem:\n  Driver_Version: "1"\ninfiniband: {x: 1}\n'
        "Device_Defaults: {Memory: {Total_Bytes: 10, Reserved_Bytes: 4}}\n"
        "Devices:\n  - {Index: 0, UUID: GPU-0, pci: {bus_id: '0'}}\n"
    )
    assert devices == [Device(0, "GPU-0", 10, 4)]


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        (
            "device_defaults:\n  memory: {total_bytes: 1000}\n  Memory: {reserved_bytes: 10}\n",
            r"device_defaults.memory is named twice \(Memory, memory\)",
        ),
        (
            "devices:\n  - {index: 0, UUID: GPU-X, Uuid: GPU-y}\n",
            r"uuid is named twice \(UUID, Uuid\)",
        ),
        (
            "devices:\n"
            "  - {index: 1, memory: {total_bytes: 8, Reserved_bytes: 2, reserved_bytes: ~}}\n",
            "reserved_bytes is named twice",
        ),
        (
            "devices:\n  - {index: 2, Memory: {total_bytes: 8}, memory: ~}\n",
            "memory is named twice",
        ),
    ],
)
def test_a_field_named_twice_is_refused(entries: str, needle: str) -> None:
    """Go's JSON decoding would set the field once per key that names it; we do not layer."""
    with pytest.raises(ProfileError, match=needle):
        parse_profile(HEADER + entries)


@pytest.mark.parametrize(
    ("uuid", "text"),
    [
        ("12345", "12345"),
        ("yes", "true"),
        ("0x10", "16"),
        # Go would format these as float32 text or decode the bytes; refused instead
        ("1e3", "devices[0].uuid must be text, not a number; quote it"),
        ("0.1", "devices[0].uuid must be text, not a number; quote it"),
        ("!!binary R1BVLTA=", "devices[0].uuid must be text, not a bytes; quote it"),
    ],
)
def test_a_scalar_uuid_is_the_text_go_gives_it(uuid: str, text: str) -> None:
    profile = HEADER + f"devices:\n  - {{index: 0, uuid: {uuid}}}\n"
    if text.startswith("devices[0]"):
        with pytest.raises(ProfileError, match=re.escape(text)):
            parse_profile(profile)
        return
    assert parse_profile(profile)[0].uuid == text


def test_numbers_reach_integer_fields_as_the_engine_reads_them() -> None:
    """A missing index is Go's zero value; integral floats and Go int syntax are ints."""
    devices = parse_profile(
        'version: "1.0"\nsystem: {driver_version: x, num_devices: 0x2}\n'
        "device_defaults: {memory: {total_bytes: 42949672960.0, reserved_bytes: 6.11319808e8}}\n"
        "devices:\n  - {uuid: GPU-zero}\n  - {index: 1.0, uuid: GPU-one}\n"
    )
    assert devices == [
        Device(0, "GPU-zero", 42949672960, 611319808),
        Device(1, "GPU-one", 42949672960, 611319808),
    ]


def test_first_entry_wins_for_uuid_lookup_by_index_not_position() -> None:
    devices = parse_profile(
        HEADER + "device_defaults: {memory: {total_bytes: 1}}\n"
        "devices:\n  - {index: 1, uuid: GPU-one}\n  - {index: 0, uuid: GPU-zero}\n"
    )
    assert [d.uuid for d in devices] == ["GPU-zero", "GPU-one"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("system: {driver_version: '1'}\n", "version"),
        ('version: "1.0"\n', "driver_version"),
        (HEADER + "devices:\n  - {index: 0}\n  - {index: 0}\n", "not unique"),
        (HEADER + "devices: {a: 1}\n", "must be a list"),
        (HEADER + "device_defaults: {memory: {total_bytes: -1}}\n", "non-negative"),
        (HEADER + "device_defaults: {memory: {total_bytes: 1.5}}\n", "non-negative"),
        ("version: [\n", "not valid YAML"),
        (HEADER + "device_defaults: {memory: {total_bytes: !!int abc}}\n", "not valid YAML"),
        ("version: '1'\nsystem: {driver_version: x, num_devices: !!bool maybe}\n", "not valid"),
        (HEADER + "devices:\n  - {uuid: GPU-a}\n  - {index: 0}\n", "not unique"),
        (HEADER + "devices:\n  - {index: 0.5}\n", "index must be an integer"),
        (HEADER + "devices:\n  - {index: 1e19}\n", "index must be an integer"),
        ("- a\n", "mapping"),
        (HEADER + "device_defaults: &d {<<: *d}\n", "brings in the map that contains it"),
        # go-yaml: "anchor 'a' value contains itself", even in a key nobody reads
        (HEADER + "x: &a [*a]\n", "an alias refers to a map or list that contains it"),
        (HEADER + "x: &a {y: [1, {z: *a}]}\n", "contains it"),
        # a type error anywhere in a field the engine decodes fails its whole profile
        ('version: []\nsystem: {driver_version: "1"}\n', "version must be text"),
        ('version: "1"\nsystem: {driver_version: {a: 1}}\n', "driver_version must be text"),
        (HEADER + "devices:\n  - {index: 0, uuid: [GPU-a]}\n", r"devices\[0\].uuid must be text"),
        (HEADER + "device_defaults: {memory: {free_bytes: -1}}\n", "free_bytes"),
        (HEADER + "device_defaults: {memory: {used_bytes: 1.5}}\n", "used_bytes"),
        (HEADER + "device_defaults: {memory: {memory_bus_width: 5000000000}}\n", "bus_width"),
        (HEADER + "device_defaults: {Memory: {total_bytes: -1}, memory: {}}\n", "named twice"),
        # entries the engine never serves are decoded all the same
        (
            HEADER + "system: {driver_version: x, num_devices: 1}\n"
            "devices:\n  - {index: 0}\n  - {index: 9, memory: {total_bytes: x}}\n",
            r"devices\[1\].memory.total_bytes",
        ),
    ],
)
def test_invalid_profiles_are_rejected_with_a_reason(text: str, needle: str) -> None:
    with pytest.raises(ProfileError, match=needle):
        parse_profile(text)


def test_a_profile_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + "# padding\n" * 110_000)
    with pytest.raises(ProfileError, match="bytes, over allocwatch's bound of 1048576 bytes"):
        profilesource.load_devices(path)


def test_a_profile_of_too_many_nodes_is_refused_for_that() -> None:
    text = HEADER + "devices:\n" + "".join(f"  - index: {i}\n" for i in range(10_000))
    with pytest.raises(ProfileError, match=r"^more than 20000 nodes"):
        parse_profile(text)


def test_a_node_shared_through_aliases_is_no_cycle() -> None:
    devices = parse_profile(
        HEADER + "m: &m {total_bytes: 8, reserved_bytes: 2}\n"
        "device_defaults: {memory: *m}\ndevices:\n  - {index: 0, memory: *m}\n"
    )
    assert devices == [Device(0, "", 8, 2)]


def total_bytes_profile(total: int) -> str:
    return HEADER + f"device_defaults: {{memory: {{total_bytes: {total}}}}}\n"


def loaded_source(path: Path, total: int) -> ProfileSource:
    """A ProfileSource that has read a profile of `total` bytes per device from `path`."""
    path.write_text(total_bytes_profile(total))
    source = ProfileSource(path)
    assert source.refresh()[0].total_bytes == total  # type: ignore[index]
    return source


class TestProfileSource:
    def test_missing_then_appears(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        path = tmp_path / "config.yaml"
        source = ProfileSource(path)
        with caplog.at_level(logging.WARNING):
            assert source.refresh() is None
            assert source.refresh() is None
        assert sum("missing" in r.message for r in caplog.records) == 1  # logged once
        path.write_text(HEADER + "device_defaults: {memory: {total_bytes: 9}}\n")
        assert source.refresh() is not None and len(source.devices or []) == 8

    def test_rereads_on_change_and_keeps_last_good_when_malformed(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        path.write_text(HEADER + "device_defaults: {memory: {total_bytes: 9}}\n")
        source = ProfileSource(path)
        first = source.refresh()
        assert first is not None
        path.write_text("version: [broken\n")
        assert source.refresh() == first
        assert source.error is not None and "not valid YAML" in source.error
        path.write_text(
            HEADER
            + "device_defaults: {memory: {total_bytes: 7}}\n"
            + "devices:\n  - {index: 0, uuid: GPU-new}\n"
        )
        assert source.refresh() == [Device(0, "GPU-new", 7, 0)]
        assert source.error is None

    def test_same_size_rewrite_detected_by_mtime(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        source = loaded_source(path, 7)
        path.write_text(total_bytes_profile(8))
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000))
        assert source.refresh()[0].total_bytes == 8  # type: ignore[index]

    def test_a_size_change_under_the_same_mtime_is_detected(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        source = loaded_source(path, 7)
        st = path.stat()
        path.write_text(total_bytes_profile(70))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert source.refresh()[0].total_bytes == 70  # type: ignore[index]

    def test_a_new_inode_under_the_same_mtime_and_size_is_detected(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        source = loaded_source(path, 7)
        st = path.stat()
        new = tmp_path / "config.yaml.new"
        new.write_text(total_bytes_profile(8))
        os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.rename(new, path)  # how a ConfigMap update or an atomic writer replaces it
        assert path.stat().st_ino != st.st_ino
        assert source.refresh()[0].total_bytes == 8  # type: ignore[index]

    def test_a_deleted_profile_drops_its_devices(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        source = loaded_source(path, 7)
        path.unlink()
        assert source.refresh() is None
        assert source.devices is None  # so the watcher reports not ready
        assert source.error is not None and "missing" in source.error

    def test_malformed_at_start_means_no_devices(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        path.write_text("nonsense: [")
        source = ProfileSource(path)
        assert source.refresh() is None
        assert source.error is not None

    @pytest.mark.timing
    def test_a_fifo_is_refused_without_blocking(self, tmp_path: Path) -> None:
        path = tmp_path / "config.yaml"
        os.mkfifo(path)
        source = ProfileSource(path)
        outcome: list[object] = []
        attempt = threading.Thread(target=lambda: outcome.append(source.refresh()), daemon=True)
        attempt.start()
        attempt.join(timeout=5)
        if attempt.is_alive():
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # let the reader go
            pytest.fail("reading the profile blocked on the FIFO")
        assert outcome == [None]
        assert source.error is not None and "not a regular file" in source.error

    def test_a_read_error_is_retried_though_the_file_looks_unchanged(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """chmod fixes a permission error without touching mtime or size: read again anyway."""
        path = tmp_path / "config.yaml"
        path.write_text(HEADER + "device_defaults: {memory: {total_bytes: 7}}\n")

        def denied(path: Path) -> tuple[bytes, int]:
            raise PermissionError(13, "Permission denied", str(path))

        source = ProfileSource(path)
        monkeypatch.setattr(profilesource, "read_regular_file", denied)
        with caplog.at_level(logging.ERROR):
            assert source.refresh() is None
            assert source.refresh() is None
        assert source.error is not None and "Permission denied" in source.error
        assert sum("Permission denied" in r.message for r in caplog.records) == 1
        monkeypatch.undo()
        devices = source.refresh()
        assert devices is not None and devices[0] == Device(0, "", 7, 0)
        assert source.error is None


def test_minor_numbers_are_the_engines() -> None:
    # Given on one entry, the engine reports 0 for an entry without one and
    # the index for an index no entry lists.
    devices = parse_profile(
        'version: "1.0"\nsystem: {driver_version: x, num_devices: 4}\n'
        + "devices:\n  - {index: 0, uuid: G0, minor_number: 7}\n  - {index: 2, uuid: G2}\n"
    )
    assert [d.minor_number for d in devices] == [7, 1, 0, 3]
    assert [d.dra_number for d in devices] == [7, 1, 0, 3]


def test_without_any_minor_number_a_device_is_named_by_its_index() -> None:
    devices = parse_profile(HEADER + "devices:\n  - {index: 1, uuid: G1}\n  - {index: 0}\n")
    assert [d.minor_number for d in devices] == [None, None]
    assert [d.dra_number for d in devices] == [0, 1]


def test_a_minor_number_of_zero_counts_as_given() -> None:
    devices = parse_profile(HEADER + "devices:\n  - {index: 1, minor_number: 0}\n  - {index: 0}\n")
    assert [d.minor_number for d in devices] == [0, 0]


@pytest.mark.parametrize("value", ["x", "1.5", "[1]"])
def test_a_minor_number_of_the_wrong_type_is_refused(value: str) -> None:
    with pytest.raises(ProfileError, match=r"devices\[0\]\.minor_number"):
        parse_profile(HEADER + f"devices:\n  - {{index: 0, minor_number: {value}}}\n")


def test_a_devices_power_and_thermal_blocks_replace_the_defaults_wholesale() -> None:
    devices = parse_profile(
        HEADER
        + "device_defaults:\n"
        + "  memory: {total_bytes: 100}\n"
        + "  power: {current_draw_mw: 10, enforced_limit_mw: 70,\n"
        + "          min_limit_mw: 5, max_limit_mw: 80}\n"
        + "  thermal: {temperature_gpu_c: 30, target_temperature_c: 80, slowdown_threshold_c: 90}\n"
        + "devices:\n"
        + "  - {index: 0, power: {current_draw_mw: 20, default_limit_mw: 60}}\n"
        + "  - {index: 1, thermal: {temperature_gpu_c: 40}}\n"
        + "  - {index: 2, power: {current_draw_mw: 20, max_limit_mw: 50}}\n"
    )
    assert devices[0].power == Power(idle=20, limit=60, minimum=0, maximum=0)
    assert devices[0].thermal == Thermal(idle=30, target=80, slowdown=90, shutdown=0)
    assert devices[1].power == Power(idle=10, limit=70, minimum=5, maximum=80)
    assert devices[1].thermal == Thermal(idle=40, target=0, slowdown=0, shutdown=0)
    assert devices[2].power == Power(idle=20, limit=50, minimum=0, maximum=50)  # max, if no other


def test_no_power_or_thermal_block_is_none() -> None:
    (device,) = parse_profile(HEADER + "devices: [{index: 0, memory: {total_bytes: 1}}]\n")
    assert device.power is None and device.thermal is None


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        ("power: {current_draw_mw: -1}", "device_defaults.power.current_draw_mw"),
        ("power: {current_draw_mw: 4294967296}", "device_defaults.power.current_draw_mw"),
        ("power: {max_limit_mw: lots}", "device_defaults.power.max_limit_mw"),
        ("thermal: {temperature_gpu_c: 1.5}", "device_defaults.thermal.temperature_gpu_c"),
        ("thermal: [30]", "device_defaults.thermal"),
    ],
)
def test_a_power_or_thermal_field_the_engine_refuses_is_refused(block: str, needle: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(needle)):
        parse_profile(HEADER + f"device_defaults: {{memory: {{total_bytes: 1}}, {block}}}\n")
