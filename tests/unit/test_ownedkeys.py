"""Our keys in the override document: set, removed and checked over one table."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from allocwatch.document import parse_document
from allocwatch.ownedkeys import ABSENT, Publication, apply, holds
from allocwatch.reconcile import MemoryReading
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
