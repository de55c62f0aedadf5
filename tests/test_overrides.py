"""The override document: strict load, merge, write-on-change, restore, retract."""

from __future__ import annotations

import copy
import os
import random
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from allocwatch import overrides
from allocwatch.overrides import (
    DocumentError,
    OverridesPublisher,
    PublishError,
    merge_readings,
    parse_document,
    remove_readings,
    render_document,
)
from allocwatch.reconcile import MemoryReading

R = MemoryReading


@pytest.mark.parametrize(
    "text",
    [
        "devices:\n  '0':\n    memory: {used_bytes: 1}\n",
        "devices:\n  0:\n    memory: {used_bytes: 1}\n",  # int key, as go-yaml accepts
        '{"devices": {"0": {"memory": {"used_bytes": 1}}}}',  # JSON
        "version: 2\n",
        "",
        "# only a comment\n",
        "all: {memory: {used_bytes: 5}}\ndevices: {'0': null}\n",
        "devices:\n  '0':\n    memory: {used_bytes: 2.1169176576e+10}\n",
        "version: 2.0\n",  # Go's int field takes an integral number
        "all: {x: .5_0, y: <<}\n",
    ],
)
def test_accepts_what_the_engine_accepts(text: str) -> None:
    parse_document(text)


def test_only_the_first_document_counts_as_the_engine_reads_it() -> None:
    # go-yaml, and so the engine and nvml-mock-ctl, never read past the first
    assert parse_document("version: 1\n---\n") == {"version": 1}
    assert parse_document("devices: {}\n---\nbogus: [\n") == {"devices": {}}


def test_merges_read_in_go_yamls_order() -> None:
    # a later merge sets a key an earlier one already set: the engine refuses it
    with pytest.raises(DocumentError, match="duplicate key"):
        parse_document("all: &a {x: 1}\ndevices: {'0': {x: 2, <<: *a}}\n")
    doc = parse_document("all: &a {x: 1}\ndevices: {'0': {<<: [*a, {z: 2}]}}\n")
    assert doc["devices"]["0"] == {"x": 1, "z": 2}


def test_an_integral_float_version_is_kept_as_that_int() -> None:
    assert parse_document("version: 2.0\n") == {"version": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("devices: {1.0: {a: 1}}", {"devices": {"1": {"a": 1}}}),
        ("devices: {0x2: {a: 1}}", {"devices": {"2": {"a": 1}}}),
        (
            "all: {y: 1, off: 2, -0.0: 3, 0.5: 4, 1e6: 5, 16777217.0: 6, 0.1: 7}",
            {
                "all": {
                    "true": 1,
                    "false": 2,
                    "-0": 3,
                    "0.5": 4,
                    "1e+06": 5,
                    "1.6777216e+07": 6,  # float32 precision, as Go writes it
                    "0.1": 7,
                }
            },
        ),
        ("all: {.inf: 1, -.Inf: 2, .NaN: 3, 1e40: 4}", None),
        ("all: {!!binary aGk=: 1}", {"all": {"hi": 1}}),
    ],
)
def test_keys_are_named_as_the_engine_names_them(text: str, expected: object) -> None:
    """sigs.k8s.io/yaml turns int, bool, float and binary keys into text."""
    if expected is None:  # 1e40 is beyond float32: an infinity too, so a duplicate
        with pytest.raises(DocumentError, match=r"duplicate key '\.inf'"):
            parse_document(text)
        assert parse_document(text.replace(", 1e40: 4", "")) == {
            "all": {".inf": 1, "-.inf": 2, ".nan": 3}
        }
        return
    assert parse_document(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "all:\n  fan: {1.5: x, speed_percent: 60}\n",
        "devices: {'3': {a: 1}, 1e6: {b: 2}}\n",
        "all: {.inf: 1, z: 2}\n",
        "all: {!!binary aGk=: 1, b: 2}\n",
    ],
)
def test_a_document_with_float_or_binary_keys_is_merged_and_written(
    tmp_path: Path, text: str
) -> None:
    """Every key is text once read, so a map mixing them with names still sorts and renders."""
    path = tmp_path / "overrides.yaml"
    path.write_text(text)
    before = parse_document(text)
    result = OverridesPublisher(path).publish({0: MemoryReading(1, 2)})
    assert result.wrote
    after = parse_document(path.read_text())
    assert after["devices"]["0"]["memory"] == {"used_bytes": 1, "free_bytes": 2}
    del after["devices"]["0"]
    if not after["devices"]:
        del after["devices"]
    assert after.pop("version") == 1
    assert after == before


@pytest.mark.parametrize(
    "text", ['devices: {1.0: {}, "1": {}}', 'all: {y: 1, "true": 2}', "all: {1: a, 1.0: b}"]
)
def test_two_keys_the_engine_names_alike_are_refused(text: str) -> None:
    with pytest.raises(DocumentError, match="duplicate key"):
        parse_document(text)


def test_int_device_keys_become_strings() -> None:
    assert parse_document("devices: {0: {fan: {speed_percent: 60}}}") == {
        "devices": {"0": {"fan": {"speed_percent": 60}}}
    }


# Nine lines that PyYAML loads as shared lists but that expand to 10**9 items.
ALIAS_BOMB = "all:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("owner: allocwatch\n", "unknown top-level key"),
        ("Devices: {}\nVersion: 1\n", "Devices, Version: the engine reads them"),
        ("version: '1'\n", "version"),
        ("version: true\n", "version"),
        ("version: 1\nversion: 1\n", "duplicate key"),
        ("devices: &d {'0': *d}\n", "contains it"),
        ("all: &x {k: [1, {j: *x}]}\n", "contains it"),
        (ALIAS_BOMB, "past 100000 nodes"),
        ("all: {k: " + "[" * 600 + "]" * 600 + "}\n", "nested too deeply"),
        ("devices:\n  '0': {}\n  '0': {}\n", "duplicate key"),
        ("devices:\n  '0':\n    memory: {used_bytes: 1, used_bytes: 2}\n", "duplicate key"),
        ("devices:\n  0: {}\n  '0': {}\n", "duplicate key"),
        ("- 1\n- 2\n", "must be a mapping"),
        ("just text\n", "must be a mapping"),
        ("devices: [1]\n", "`devices` must be a mapping"),
        ("all: [1]\n", "`all` must be a mapping"),
        ("devices: {'0': [1]}\n", "must be a mapping"),
        ("devices: {'0': {memory: [\n", "not valid YAML"),
        ("all: {fan: {count: !!int two}}\n", "not valid YAML"),
        ("all: {x: !!float abc}\n", "not valid YAML"),
        ("all: {x: !!bool maybe}\n", "not valid YAML"),
        ("all: {x: !!timestamp abc}\n", "not valid YAML"),
        ("all: {x: !!int ''}\n", "not valid YAML"),
        ("all: {x: !!null foo}\n", "not valid YAML"),
        ("all: {x: .inf}\n", "non-finite"),
        ("all: {x: [-.Inf]}\n", "non-finite"),
        ("devices: {'0': {x: .nan}}\n", "non-finite"),
        ("all: {~: 1}\n", "null key"),
        ("all: {? [a, b]\n  : 1}\n", "not one the engine can name"),
        ("all: {? {a: 1}\n  : 1}\n", "not one the engine can name"),
        ("all: {!!binary /w==: 1}\n", "not one the engine can name"),  # not UTF-8
        ("devices: {18446744073709551615: {}}\n", "out of range"),
        ("version: 18446744073709551615\n", "version"),
        ("version: 1.5\n", "version"),
    ],
)
def test_rejects_what_would_break_the_file(text: str, needle: str) -> None:
    with pytest.raises(DocumentError, match=needle):
        parse_document(text)


def test_merge_sets_only_our_keys_as_ints_and_keeps_the_rest() -> None:
    doc = {
        "version": 1,
        "all": {"performance_state": "P8"},
        "devices": {
            "0": {"thermal": {"temperature_gpu_c": 85}, "memory": {"total_bytes": 7}},
            "3": {"fan": {"speed_percent": "60"}},
        },
    }
    merged = merge_readings(doc, {0: R(4096, 8192), 1: R(1, 2)})
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
    merged = merge_readings({}, {0: R(0, 10)})
    assert merged == {
        "version": 1,
        "devices": {"0": {"memory": {"used_bytes": 0, "free_bytes": 10}}},
    }
    assert list(merged["devices"]["0"]) == ["memory"]
    assert set(merged["devices"]["0"]["memory"]) == {"used_bytes", "free_bytes"}


@pytest.mark.parametrize("bucket", [None, "text", [1]])
def test_merge_replaces_non_map_buckets_and_memory(bucket: object) -> None:
    merged = merge_readings({"devices": {"0": bucket}}, {0: R(1, 2)})
    assert merged["devices"]["0"] == {"memory": {"used_bytes": 1, "free_bytes": 2}}
    merged = merge_readings({"devices": {"0": {"memory": bucket}}}, {0: R(1, 2)})
    assert merged["devices"]["0"] == {"memory": {"used_bytes": 1, "free_bytes": 2}}


def test_remove_prunes_empty_maps_and_keeps_others() -> None:
    doc = merge_readings({"all": {"x": 1}}, {0: R(1, 2), 1: R(3, 4)})
    doc["devices"]["1"]["thermal"] = {"t": 1}
    doc["devices"]["1"]["memory"]["total_bytes"] = 9
    out = remove_readings(doc, [0, 1])
    assert out == {
        "version": 1,
        "all": {"x": 1},
        "devices": {"1": {"thermal": {"t": 1}, "memory": {"total_bytes": 9}}},
    }
    assert remove_readings(merge_readings({}, {0: R(1, 2)}), [0]) == {"version": 1}


def test_merge_and_remove_leave_their_input_untouched() -> None:
    doc = parse_document(
        "version: 1\n"
        "devices:\n"
        "  '0': {memory: {used_bytes: 1, free_bytes: 2, total_bytes: 3}, fan: {speed: 1}}\n"
        "  '1': {memory: {used_bytes: 4, free_bytes: 5}}\n"
    )
    before = copy.deepcopy(doc)
    merged = merge_readings(doc, {0: R(7, 8), 2: R(9, 10)})
    removed = remove_readings(merged, [0, 1, 2])
    assert doc == before
    assert merged["devices"]["0"]["memory"] == {"used_bytes": 7, "free_bytes": 8, "total_bytes": 3}
    assert removed == {
        "version": 1,
        "devices": {"0": {"memory": {"total_bytes": 3}, "fan": {"speed": 1}}},
    }
    assert merged["devices"]["1"]["memory"] == {"used_bytes": 4, "free_bytes": 5}


def test_rendered_yaml_round_trips_and_quotes_go_booleans() -> None:
    doc = {"version": 1, "devices": {"0": {"x": {"a": "y", "b": "n", "c": "2001-12-14"}}}}
    text = render_document(doc)
    assert parse_document(text) == doc
    assert '"y"' in text and '"n"' in text
    assert yaml.safe_load(text)["devices"]["0"]["x"]["c"] == "2001-12-14"


def test_merge_keys_are_read_as_go_yaml_reads_them() -> None:
    text = """
version: 1
all: &base {fan: {speed_percent: 40}, power: {limit_w: 300}}
devices:
  "0": {<<: *base, thermal: {temperature_gpu_c: 90}}
  "1": {<<: [*base], ecc: {mode: 1}}
  "2": {k: <<}
"""
    doc = parse_document(text)
    assert doc["devices"]["0"] == {
        "fan": {"speed_percent": 40},
        "power": {"limit_w": 300},
        "thermal": {"temperature_gpu_c": 90},
    }
    assert doc["devices"]["1"]["power"] == {"limit_w": 300}
    assert doc["devices"]["2"] == {"k": "<<"}  # only a key merges


@pytest.mark.parametrize(
    "text",
    [
        'devices: {"0": {<<: {a: 1}, b: 1, b: 2}}',
        # strict go-yaml counts merged keys as set: "key already set in map"
        'all: &a {x: 1}\ndevices: {"0": {<<: *a, x: 2}}',
        'all: &a {x: 1}\ndevices: {"0": {x: 2, <<: *a}}',
        'all: {a: &a {x: 1}, c: &c {x: 3}}\ndevices: {"0": {<<: [*a, *c]}}',
    ],
)
def test_a_key_set_twice_through_a_merge_is_refused(text: str) -> None:
    with pytest.raises(DocumentError, match="duplicate key"):
        parse_document(text)


# Strings go-yaml v2 (the engine's parser) resolves as numbers when plain,
# though PyYAML's resolver does not: a Go writer quotes them, and so must we.
GO_NUMBERS = ["1e3", "1E+3", "-1.5e3", "+.5e-2", "1_0e3", "0o17", "0O17", "0X1F", "0B11"]
GO_STRINGS = ["1e", "e3", "0o9", "0x", "1.2.3", "v1e3", "1e3x"]


# Hand-written values as the engine reads them (go-yaml v2), where PyYAML's own
# YAML 1.1 reading differs: kept as the engine reads them through a publish.
HAND_WRITTEN = [
    ("y", True), ("n", False), ("1e3", 1000.0), ("9e1", 90.0), ("8.5e1", 85.0),
    ("0o17", 15), ("0X1F", 31), ("08", 8.0), ("1:30", "1:30"), ("=", "="), ("017", 15),
]  # fmt: skip


def test_hand_written_values_keep_the_engines_reading_through_a_publish(target: Path) -> None:
    target.write_text(
        "all:\n" + "".join(f"  k{i}: {text}\n" for i, (text, _) in enumerate(HAND_WRITTEN))
    )
    assert OverridesPublisher(target).publish({0: R(1, 2)}).wrote
    written = target.read_text()
    expected = {f"k{i}": value for i, (_, value) in enumerate(HAND_WRITTEN)}
    assert parse_document(written)["all"] == expected
    # What we wrote reads the same under YAML 1.1 too: nothing is left ambiguous.
    assert yaml.safe_load(written)["all"] == expected


def test_strings_go_yaml_reads_as_numbers_are_double_quoted() -> None:
    doc = {"all": {f"k{i}": v for i, v in enumerate(GO_NUMBERS + GO_STRINGS)}}
    text = render_document(doc)
    assert parse_document(text) == doc
    lines = dict(line.strip().split(": ", 1) for line in text.splitlines()[1:])
    for i, value in enumerate(GO_NUMBERS):
        assert lines[f"k{i}"] == f'"{value}"', text
    for i, value in enumerate(GO_STRINGS, start=len(GO_NUMBERS)):
        assert lines[f"k{i}"] == value, text


SCALARS_THAT_LOOK_TYPED = [
    "1", "-1", "0x1F", "0o17", "1_000", "1.5", "1e3", ".inf", "-.Inf", ".nan", "true",
    "False", "yes", "off", "null", "~", "", " ", "<<", "=", "a: b", "- x", "#", "2001-12-14",
]  # fmt: skip


def test_every_scalar_keeps_its_type_through_a_render_and_back() -> None:
    values = [*SCALARS_THAT_LOOK_TYPED, 1, -1, 1.5, 1e300, True, False, None]
    doc = {
        "all": {f"k{i}": v for i, v in enumerate(values)}
        | {s: s for s in SCALARS_THAT_LOOK_TYPED if s}
    }
    doc["devices"] = {"0": {"list": values}}
    # Twice: the second render answers from the resolver cache the first filled.
    for _ in range(2):
        back = parse_document(render_document(doc))
        assert back == doc
        assert [type(v) for v in back["devices"]["0"]["list"]] == [type(v) for v in values]


def _random_document(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    leaves: list[Any] = [
        *SCALARS_THAT_LOOK_TYPED, 0, 1, -7, 2**70, 0.0, -0.0, 1.0, 1.5, True, False, None,
        "%", "%d", "50% used", "%%s", "a long string " * 12, overrides._INTEGER_MARK,
    ]  # fmt: skip

    def value(level: int) -> Any:
        pick = rng.random()
        if level < 4 and pick < 0.25:
            return _random_document(rng, level + 1)
        if level < 4 and pick < 0.35:
            return [value(level + 1) for _ in range(rng.randrange(4))]
        return rng.choice(leaves) if pick < 0.7 else rng.randrange(-(2**40), 2**40)

    keys = ["0", "1", "10", "2", "memory", "used_bytes", "y", "%", "k%d", "a b", "z" * 130]
    return {rng.choice(keys): value(depth) for _ in range(rng.randrange(5))}


def _with_new_integers(node: Any, rng: random.Random) -> Any:
    if type(node) is int:
        return rng.choice([0, -1, 2**64, rng.randrange(10**12)])
    if isinstance(node, dict):
        return {k: _with_new_integers(v, rng) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_new_integers(v, rng) for v in node]
    return node


def test_the_renderer_writes_what_a_full_render_writes() -> None:
    rng = random.Random(7)
    render = overrides.DocumentRenderer()
    for _ in range(300):
        doc = _random_document(rng)
        # mostly documents that differ only in integers, as consecutive writes do
        for variant in [doc] + [_with_new_integers(doc, rng) for _ in range(3)]:
            assert render(variant) == render_document(variant)


@pytest.mark.parametrize(
    "values",
    [
        [1, True, 1.0, 1, False, 0, 0.0, -0.0, 0],  # equal in Python, written differently
        [1, "1", 2, "%d", 3, "%", 4],
        [5, overrides._INTEGER_MARK, 6],  # our mark in someone else's text
    ],
)
def test_the_renderer_notices_a_value_that_is_no_longer_an_integer(values: list[Any]) -> None:
    render = overrides.DocumentRenderer()
    for doc in [{"all": {"x": v}} for v in values] + [{"all": {"x": [v, 9]}} for v in values]:
        assert render(doc) == render_document(doc)
    marked_key = {"all": {overrides._INTEGER_MARK: 1}}
    assert render(marked_key) == render_document(marked_key)


def test_the_renderer_renders_a_shape_once(monkeypatch: pytest.MonkeyPatch) -> None:
    render = overrides.DocumentRenderer()
    full_renders: list[object] = []
    real = overrides.render_document
    monkeypatch.setattr(
        overrides, "render_document", lambda doc: full_renders.append(doc) or real(doc)
    )
    docs = [merge_readings({"all": {"x": 1.5}}, {0: R(used, 80 - used)}) for used in (0, 40, 80)]
    texts = [render(doc) for doc in docs]
    assert len(full_renders) == 1
    assert texts == [real(doc) for doc in docs]
    render(merge_readings(docs[0], {1: R(0, 80)}))  # a new device: a new shape
    assert len(full_renders) == 2


# --- the publisher on a real directory ---------------------------------------


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return tmp_path / "overrides.yaml"


def test_first_publish_creates_a_0644_file_and_a_lock(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert pub.publish({0: R(1, 2)}).wrote
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert parse_document(target.read_text())["devices"]["0"]["memory"] == {
        "used_bytes": 1,
        "free_bytes": 2,
    }
    assert target.with_name("overrides.yaml.lock").exists()
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_no_readings_create_no_file(target: Path) -> None:
    pub = OverridesPublisher(target)
    assert not pub.publish({}).wrote
    assert not target.exists()
    assert not target.with_name("overrides.yaml.lock").exists()


def test_a_temp_file_left_by_a_crashed_write_is_reused(target: Path) -> None:
    tmp = target.with_name(".overrides.yaml.allocwatch.tmp")
    tmp.write_text("devices: {0: {memory: {used_bytes: 99999999")  # cut short
    tmp.chmod(0o600)
    assert OverridesPublisher(target).publish({0: R(1, 2)}).wrote
    assert not tmp.exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_a_symlink_at_the_temp_name_is_not_followed(target: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep\n")
    target.with_name(".overrides.yaml.allocwatch.tmp").symlink_to(elsewhere)
    pub = OverridesPublisher(target)
    with pytest.raises(PublishError, match="write"):
        pub.publish({0: R(1, 2)})
    assert elsewhere.read_text() == "keep\n"
    assert pub.publish({0: R(1, 2)}).wrote  # the link was removed with the failed write


def test_unchanged_readings_write_nothing(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2)})
    st = target.stat()
    for _ in range(50):
        assert not pub.publish({0: R(1, 2)}).wrote
    assert pub.writes == 1
    assert target.stat().st_ino == st.st_ino and target.stat().st_mtime_ns == st.st_mtime_ns


def test_our_own_write_is_not_parsed_again_but_an_edit_is(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.write_text("all:\n  performance_state: P8\nversion: 1\n")
    pub = OverridesPublisher(target)
    parsed: list[str] = []
    real_parse = overrides.parse_document
    monkeypatch.setattr(
        overrides, "parse_document", lambda text: parsed.append(text) or real_parse(text)
    )
    assert pub.publish({0: R(1, 2)}).wrote
    assert len(parsed) == 1  # the human's document, before merging into it
    assert not pub.publish({0: R(1, 2)}).wrote
    assert pub.publish({0: R(3, 0)}).wrote
    assert len(parsed) == 1
    target.write_text(target.read_text().replace("P8", "P0"))
    assert pub.publish({0: R(5, 0)}).wrote
    assert len(parsed) == 2
    doc = parse_document(target.read_text())
    assert doc["all"] == {"performance_state": "P0"}
    assert doc["devices"]["0"]["memory"] == {"used_bytes": 5, "free_bytes": 0}


def test_equivalent_document_written_by_others_is_not_rewritten(target: Path) -> None:
    target.write_text(
        '{"devices": {"0": {"memory": {"free_bytes": 2, "used_bytes": 1}}}, "version": 1}'
    )
    pub = OverridesPublisher(target)
    assert not pub.publish({0: R(1, 2)}).wrote


@pytest.mark.parametrize("written", ["1.0", "1e0", "true"])
def test_an_equal_but_not_integer_reading_is_rewritten_as_an_integer(
    target: Path, written: str
) -> None:
    """Equal in Python is not enough: the readings are written as integers (contract §3)."""
    target.write_text(f"devices: {{'0': {{memory: {{used_bytes: {written}, free_bytes: 2}}}}}}\n")
    pub = OverridesPublisher(target)
    assert pub.publish({0: R(1, 2)}).wrote
    assert "used_bytes: 1\n" in target.read_text()
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_a_due_write_reads_the_file_once_and_an_idle_poll_once(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2)})
    reads: list[Path] = []
    real_read = overrides.read_regular_file
    monkeypatch.setattr(
        overrides, "read_regular_file", lambda path: reads.append(path) or real_read(path)
    )
    assert pub.publish({0: R(3, 0)}).wrote  # under the lock only: the last document lacked it
    assert len(reads) == 1
    assert not pub.publish({0: R(3, 0)}).wrote  # without the lock
    assert len(reads) == 2


def test_a_write_due_by_the_last_document_is_checked_again_under_the_lock(
    target: Path,
) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2)})
    # Another writer publishes what we are about to, after our last look.
    other = "devices:\n  '0':\n    memory: {free_bytes: 0, used_bytes: 3}\nversion: 1\n"
    tmp = target.with_name("other.tmp")
    tmp.write_text(other)
    tmp.rename(target)
    before = target.stat()
    assert not pub.publish({0: R(3, 0)}).wrote
    assert target.read_text() == other
    assert target.stat().st_ino == before.st_ino


def test_later_publish_wins(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(9999, 1)})
    pub.publish({0: R(0, 10000)})
    assert parse_document(target.read_text())["devices"]["0"]["memory"] == {
        "used_bytes": 0,
        "free_bytes": 10000,
    }


def test_human_overrides_survive(target: Path) -> None:
    target.write_text(
        "all:\n  performance_state: P8\ndevices:\n  '0':\n    thermal:\n"
        "      temperature_gpu_c: 85\nversion: 1\n"
    )
    OverridesPublisher(target).publish({0: R(4096, 8192)})
    doc = parse_document(target.read_text())
    assert doc["all"] == {"performance_state": "P8"}
    assert doc["devices"]["0"]["thermal"] == {"temperature_gpu_c": 85}
    assert doc["devices"]["0"]["memory"] == {"used_bytes": 4096, "free_bytes": 8192}


def test_devices_sharing_one_yaml_anchor_get_their_own_readings(target: Path) -> None:
    # A human may alias buckets; each device must still show its own numbers.
    target.write_text(
        "devices:\n  '0': &gpu\n    thermal: {temperature_gpu_c: 85}\n  '1': *gpu\nversion: 1\n"
    )
    OverridesPublisher(target).publish({0: R(1, 2), 1: R(3, 4)})
    text = target.read_text()
    devices = parse_document(text)["devices"]
    thermal = {"temperature_gpu_c": 85}
    assert devices["0"] == {"thermal": thermal, "memory": {"used_bytes": 1, "free_bytes": 2}}
    assert devices["1"] == {"thermal": thermal, "memory": {"used_bytes": 3, "free_bytes": 4}}
    assert "&" not in text and "*" not in text


def test_deleted_file_is_restored(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2)})
    target.unlink()
    assert pub.publish({0: R(1, 2)}).wrote
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_external_edit_of_our_keys_is_corrected(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2)})
    target.write_text("devices: {'0': {memory: {used_bytes: 5, free_bytes: 5}}}\nversion: 1\n")
    assert pub.publish({0: R(1, 2)}).wrote


@pytest.mark.parametrize(
    "bad",
    [
        "owner: me\n",
        "version: '1'\n",
        "a: 1\na: 2\n",
        "devices: &d {'0': *d}\n",
        "all: {fan: {count: !!int two}}\n",
        # deep enough to break the YAML emitter (about 330 levels)
        "all: {k: " + "[" * 340 + "]" * 340 + "}\n",
        "%YAML 1.2\n---\nversion: 1\n",
    ],
)
def test_refused_document_is_never_overwritten(target: Path, bad: str) -> None:
    target.write_text(bad)
    before = target.stat()
    with pytest.raises(PublishError, match="leaving it untouched"):
        OverridesPublisher(target).publish({0: R(1, 2)})
    assert target.read_text() == bad
    assert target.stat().st_mtime_ns == before.st_mtime_ns


def test_nesting_is_bounded_below_what_the_emitter_can_write(target: Path) -> None:
    def nested(lists: int) -> str:  # root, `all` and the lists: lists + 2 levels
        return "all: {k: " + "[" * lists + "]" * lists + "}\n"

    with pytest.raises(DocumentError, match="over 100 levels"):
        parse_document(nested(99))
    target.write_text(nested(98))
    assert OverridesPublisher(target).publish({0: R(1, 2)}).wrote
    assert parse_document(target.read_text())["all"] == parse_document(nested(98))["all"]


def test_a_fifo_is_refused_without_blocking(target: Path) -> None:
    # opening a FIFO for reading would wait for a writer, past any shutdown
    os.mkfifo(target)
    errors: list[str] = []

    def publish() -> None:
        try:
            OverridesPublisher(target).publish({0: R(1, 2)})
        except PublishError as exc:
            errors.append(str(exc))

    attempt = threading.Thread(target=publish, daemon=True)
    attempt.start()
    attempt.join(timeout=5)
    if attempt.is_alive():
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))  # let the reader go
        pytest.fail("publish blocked opening the FIFO")
    assert len(errors) == 1 and "not a regular file" in errors[0]
    assert stat.S_ISFIFO(target.stat().st_mode)


def test_missing_directory_is_not_created(tmp_path: Path) -> None:
    target = tmp_path / "driver" / "config" / "overrides.yaml"
    with pytest.raises(PublishError, match="does not exist"):
        OverridesPublisher(target).publish({0: R(1, 2)})
    assert not (tmp_path / "driver").exists()


def test_same_size_change_gets_a_later_mtime(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 8)})
    future = target.stat().st_mtime_ns + 10**10  # as if written within one tick
    os.utime(target, ns=(future, future))
    pub.publish({0: R(2, 7)})
    after = target.stat()
    assert after.st_mtime_ns > future  # the engine sees mtime differ even at equal size


def test_retract_removes_only_our_keys(target: Path) -> None:
    target.write_text("devices: {'0': {thermal: {t: 1}}}\nversion: 1\n")
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2), 1: R(3, 4)})
    assert pub.retract([0, 1]).wrote
    assert parse_document(target.read_text()) == {
        "version": 1,
        "devices": {"0": {"thermal": {"t": 1}}},
    }
    assert target.with_name("overrides.yaml.lock").exists()


def test_retract_on_missing_file_creates_nothing(target: Path) -> None:
    assert not OverridesPublisher(target).retract([0]).wrote
    assert not target.exists()


def test_publish_drops_devices_gone_from_the_profile(target: Path) -> None:
    pub = OverridesPublisher(target)
    pub.publish({0: R(1, 2), 1: R(3, 4)})
    pub.publish({0: R(1, 2)}, remove=[1])
    assert set(parse_document(target.read_text())["devices"]) == {"0"}


def test_reading_the_document_does_not_load_grpc() -> None:
    # The e2e reader parses the file inside the watcher's pod, under its CPU
    # limit; grpc's import alone would cost it seconds a read.
    code = "import sys, allocwatch.overrides; sys.exit('grpc' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
