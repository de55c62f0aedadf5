"""Our keys in the override document: set, removed and checked over one table."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from allocwatch.document import parse_document
from allocwatch.ownedkeys import ABSENT, Publication, apply, holds
from allocwatch.reconcile import MemoryReading
from allocwatch.render import render_document
from tests.support.documents import wanted, withdrawal

R = MemoryReading
PROCESSES = ("processes",)


def merge(doc: dict[str, Any], readings: Mapping[int, MemoryReading]) -> dict[str, Any]:
    return apply(doc, wanted(readings))


def remove(doc: dict[str, Any], indices: Iterable[int]) -> dict[str, Any]:
    return apply(doc, withdrawal(indices))


def lists_wanted(lists: Mapping[int, list[Any]], absent: Iterable[int] = ()) -> Publication:
    """Only the `processes` key: each list set, and removed from `absent`."""
    out: dict[int, dict[tuple[str, ...], Any]] = {i: {PROCESSES: v} for i, v in lists.items()}
    out.update({i: {PROCESSES: ABSENT} for i in absent})
    return out


def merge_lists(doc: dict[str, Any], lists: Mapping[int, list[Any]]) -> dict[str, Any]:
    return apply(doc, lists_wanted(lists))


def remove_lists(doc: dict[str, Any], indices: Iterable[int]) -> dict[str, Any]:
    return apply(doc, lists_wanted({}, indices))


def holds_lists(doc: dict[str, Any], lists: Mapping[int, list[Any]], absent: Iterable[int]) -> bool:
    return holds(doc, lists_wanted(lists, absent))


def test_merge_sets_only_our_keys_as_ints_and_keeps_the_rest() -> None:
    doc = {
        "version": 1,
        "all": {"performance_state": "P8"},
        "devices": {
            "0": {"thermal": {"temperature_gpu_c": 85}, "memory": {"total_bytes": 7}},
            "3": {"fan": {"speed_percent": "60"}},
        },
    }
    merged = merge(doc, {0: R(4096, 8192), 1: R(1, 2)})
    assert merged["all"] == {"performance_state": "P8"}
    assert merged["devices"]["0"] == {
        "thermal": {"temperature_gpu_c": 85},
        "memory": {"total_bytes": 7, "used_bytes": 4096, "free_bytes": 8192},
    }
    assert merged["devices"]["1"] == {"memory": {"used_bytes": 1, "free_bytes": 2}}
    assert merged["devices"]["3"] == {"fan": {"speed_percent": "60"}}
    assert doc["devices"]["0"]["memory"] == {"total_bytes": 7}  # input untouched
    used = merged["devices"]["0"]["memory"]["used_bytes"]
    assert type(used) is int


def test_merge_into_empty_document_matches_upstream_shape() -> None:
    merged = merge({}, {0: R(0, 10)})
    assert merged == {
        "version": 1,
        "devices": {"0": {"memory": {"used_bytes": 0, "free_bytes": 10}}},
    }
    assert list(merged["devices"]["0"]) == ["memory"]
    assert set(merged["devices"]["0"]["memory"]) == {"used_bytes", "free_bytes"}


@pytest.mark.parametrize("bucket", [None, "text", [1]])
def test_merge_replaces_non_map_buckets_and_memory(bucket: object) -> None:
    merged = merge({"devices": {"0": bucket}}, {0: R(1, 2)})
    assert merged["devices"]["0"] == {"memory": {"used_bytes": 1, "free_bytes": 2}}
    merged = merge({"devices": {"0": {"memory": bucket}}}, {0: R(1, 2)})
    assert merged["devices"]["0"] == {"memory": {"used_bytes": 1, "free_bytes": 2}}


def test_remove_prunes_empty_maps_and_keeps_others() -> None:
    doc = merge({"all": {"x": 1}}, {0: R(1, 2), 1: R(3, 4)})
    doc["devices"]["1"]["thermal"] = {"t": 1}
    doc["devices"]["1"]["memory"]["total_bytes"] = 9
    out = remove(doc, [0, 1])
    assert out == {
        "version": 1,
        "all": {"x": 1},
        "devices": {"1": {"thermal": {"t": 1}, "memory": {"total_bytes": 9}}},
    }
    assert remove(merge({}, {0: R(1, 2)}), [0]) == {"version": 1}


def test_merge_and_remove_leave_their_input_untouched() -> None:
    doc = parse_document(
        "version: 1\n"
        "devices:\n"
        "  '0': {memory: {used_bytes: 1, free_bytes: 2, total_bytes: 3}, fan: {speed: 1}}\n"
        "  '1': {memory: {used_bytes: 4, free_bytes: 5}}\n"
    )
    before = copy.deepcopy(doc)
    merged = merge(doc, {0: R(7, 8), 2: R(9, 10)})
    removed = remove(merged, [0, 1, 2])
    assert doc == before
    assert merged["devices"]["0"]["memory"] == {"used_bytes": 7, "free_bytes": 8, "total_bytes": 3}
    assert removed == {
        "version": 1,
        "devices": {"0": {"memory": {"total_bytes": 3}, "fan": {"speed": 1}}},
    }
    assert merged["devices"]["1"]["memory"] == {"used_bytes": 4, "free_bytes": 5}


# ---- our `processes` key in the document --------------------------------------

ENTRY = {"pid": 12345678, "type": "C", "name": "ml/a/main", "used_memory_mib": 7}


def test_merge_sets_our_list_and_keeps_everything_else() -> None:
    doc = {"all": {"x": 1}, "devices": {"0": {"thermal": {"t": 85}, "processes": [{"pid": 1}]}}}
    out = merge_lists(doc, {0: [ENTRY], 2: [ENTRY]})
    assert out == {
        "version": 1,
        "all": {"x": 1},
        "devices": {
            "0": {"thermal": {"t": 85}, "processes": [ENTRY]},
            "2": {"processes": [ENTRY]},
        },
    }
    assert doc["devices"]["0"]["processes"] == [{"pid": 1}]  # the input is not modified


def test_remove_drops_only_our_key_and_prunes_empty_maps() -> None:
    doc = {"version": 1, "devices": {"0": {"processes": [ENTRY]}, "1": {"processes": [], "x": 1}}}
    assert remove_lists(doc, [0, 1, 5]) == {"version": 1, "devices": {"1": {"x": 1}}}
    assert remove_lists(doc, [0]) == {"version": 1, "devices": {"1": doc["devices"]["1"]}}
    assert remove_lists({"version": 1}, [0]) == {"version": 1}


def test_holds_is_true_only_for_exactly_our_lists() -> None:
    doc = merge_lists({}, {0: [ENTRY]})
    assert holds_lists(doc, {0: [ENTRY]}, [1])
    assert not holds_lists(doc, {0: [ENTRY]}, [0])
    assert not holds_lists(doc, {0: [ENTRY, ENTRY]}, [])
    assert not holds_lists(doc, {1: [ENTRY]}, [])
    for changed in ({"used_memory_mib": 7.0}, {"pid": 1}, {"type": "G"}, {"sm_util": 1}):
        other = merge_lists({}, {0: [{**ENTRY, **changed}]})
        assert not holds_lists(other, {0: [ENTRY]}, []), changed
    assert not holds_lists({"devices": {"0": {"processes": [ENTRY]}}}, {0: [ENTRY]}, [])


# ---- pins: nvml-mock-ctl util|power|temp ------------------------------------------

UTIL = ("dynamic_metrics", "utilization")
POWER = ("dynamic_metrics", "power")
TEMP = ("dynamic_metrics", "temperature")
OUR_UTIL = {"pattern": "steady", "gpu_min": 70, "gpu_max": 90, "memory_min": 30, "memory_max": 60}
OUR_POWER = {"base_mw": 334400, "variance_mw": 32800}
OUR_TEMP = {"base_c": 73, "ramp_c": 0, "variance_c": 5}
ACTIVE: Publication = {0: {UTIL: OUR_UTIL, POWER: OUR_POWER, TEMP: OUR_TEMP}}

# What nvml-mock-ctl writes for each pin (mockctl/config_override.go)
CTL_UTIL = {"utilization": {"gpu": 33, "memory": 33}, "dynamic_metrics": {"utilization": None}}
CTL_TEMP = {
    "thermal": {"temperature_gpu_c": 50},
    "dynamic_metrics": {"temperature": {"base_c": 50, "ramp_c": 0, "variance_c": 0}},
}
CTL_POWER = {
    "power": {"current_draw_mw": 99000},
    "dynamic_metrics": {"power": {"base_mw": 99000, "variance_mw": 0}},
}


def ctl_merge(bucket: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """nvml-mock-ctl's mergeInto: maps merge, anything else replaces."""
    out = copy.deepcopy(bucket)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = ctl_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@pytest.mark.parametrize(
    ("pin", "surface"), [(CTL_UTIL, UTIL), (CTL_TEMP, TEMP), (CTL_POWER, POWER)]
)
def test_a_device_pin_is_left_alone_and_the_other_surfaces_stay_ours(
    pin: dict[str, Any], surface: tuple[str, ...]
) -> None:
    ours = apply({}, ACTIVE)
    pinned = {**ours, "devices": {"0": ctl_merge(ours["devices"]["0"], pin)}}
    assert holds(pinned, ACTIVE)  # nothing to write: the pin stays
    after = apply(pinned, ACTIVE)
    assert after == pinned
    busier = {0: {**ACTIVE[0], surface: {"changed": 1}}}
    after = apply(pinned, busier)  # claims changed: still not ours to touch
    assert (
        after["devices"]["0"]["dynamic_metrics"][surface[1]] == pin["dynamic_metrics"][surface[1]]
    )
    # and the other surfaces follow
    other = next(k for k in (UTIL, POWER, TEMP) if k != surface)
    moved = {0: {**ACTIVE[0], other: {"moved": 1}}}
    assert apply(pinned, moved)["devices"]["0"]["dynamic_metrics"][other[1]] == {"moved": 1}


@pytest.mark.parametrize(
    ("pin", "surface"), [(CTL_UTIL, UTIL), (CTL_TEMP, TEMP), (CTL_POWER, POWER)]
)
def test_a_pin_for_all_makes_us_remove_our_key_so_it_shows_everywhere(
    pin: dict[str, Any], surface: tuple[str, ...]
) -> None:
    ours = apply({}, ACTIVE)
    pinned = {**ours, "all": copy.deepcopy(pin)}
    assert not holds(pinned, ACTIVE)
    after = apply(pinned, ACTIVE)
    assert surface[1] not in after["devices"]["0"]["dynamic_metrics"]
    assert after["all"] == pin
    assert holds(after, ACTIVE)
    # reset --gpu all deletes everything; the next poll takes the surface back
    assert apply({}, ACTIVE) == ours


def test_after_reset_of_the_device_the_next_publish_takes_the_surfaces_back() -> None:
    pinned = apply({"devices": {"0": copy.deepcopy(CTL_TEMP)}}, ACTIVE)
    assert (
        pinned["devices"]["0"]["dynamic_metrics"]["temperature"]
        == CTL_TEMP["dynamic_metrics"]["temperature"]
    )
    reset = {"version": 1}  # nvml-mock-ctl reset --gpu 0 deletes the device's entry
    assert apply(reset, ACTIVE)["devices"]["0"]["dynamic_metrics"]["temperature"] == OUR_TEMP


def test_keys_we_wrote_before_a_restart_are_ours_and_failure_fan_clocks_never_are() -> None:
    before = {
        "version": 1,
        "devices": {
            "0": {
                "dynamic_metrics": {"utilization": {"gpu_min": 1, "gpu_max": 2}, "seed": 7},
                "failure": {"mode": "lost"},
                "fan": {"speed_percent": "60"},
                "clocks": {"sm_current": 1000},
            }
        },
    }
    after = apply(before, ACTIVE)
    bucket = after["devices"]["0"]
    assert bucket["dynamic_metrics"] == {
        "utilization": OUR_UTIL,
        "power": OUR_POWER,
        "temperature": OUR_TEMP,
        "seed": 7,
    }
    assert {k: bucket[k] for k in ("failure", "fan", "clocks")} == {
        k: before["devices"]["0"][k] for k in ("failure", "fan", "clocks")
    }


def test_removal_takes_only_what_is_ours_at_that_moment() -> None:
    ours = apply({}, ACTIVE)
    pinned = {**ours, "devices": {"0": ctl_merge(ours["devices"]["0"], CTL_TEMP)}}
    gone = apply(pinned, {0: dict.fromkeys(ACTIVE[0], ABSENT)})
    assert gone["devices"]["0"] == CTL_TEMP  # the pin, whole; our two others gone


def test_an_idle_null_is_ours_and_read_back_as_such() -> None:
    idle: Publication = {0: {POWER: None, TEMP: None}}
    doc = apply({}, idle)
    assert doc["devices"]["0"]["dynamic_metrics"] == {"power": None, "temperature": None}
    assert holds(parse_document(render_document(doc)), idle)
