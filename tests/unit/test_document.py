"""The override document: its strict load, and the bounds it is read within."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from allocwatch.document import (
    DocumentError,
    parse_document,
)
from allocwatch.publisher import OverridesPublisher, PublishError
from allocwatch.reconcile import MemoryReading
from allocwatch.render import render_document
from tests.support.documents import wanted

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


def test_a_key_set_directly_and_through_a_merge_is_refused() -> None:
    # strict go-yaml refuses it too; a merge that adds new keys is read
    with pytest.raises(DocumentError, match="set twice through a merge"):
        parse_document("all: &a {x: 1}\ndevices: {'0': {x: 2, <<: *a}}\n")
    doc = parse_document("all: &a {x: 1}\ndevices: {'0': {<<: [*a, {z: 2}]}}\n")
    assert doc["devices"]["0"] == {"x": 1, "z": 2}


def test_an_integral_float_version_is_kept_as_that_int() -> None:
    assert parse_document("version: 2.0\n") == {"version": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("devices: {1: {a: 1}}", {"devices": {"1": {"a": 1}}}),
        ("devices: {0x2: {a: 1}}", {"devices": {"2": {"a": 1}}}),
        ("all: {y: 1, off: 2, -3: 3, 0o17: 4}", {"all": {"true": 1, "false": 2, "-3": 3, "15": 4}}),
        (
            "all: {-0.0: 3, 0.5: 4, 1e6: 5, 16777217.0: 6}",
            "key -0.0: allocwatch reads only text, integer and boolean keys",
        ),
        (
            "all: {.inf: 1, -.Inf: 2, .NaN: 3, 1e40: 4}",
            "key inf: allocwatch reads only text, integer and boolean keys",
        ),
        (
            "all: {!!binary aGk=: 1}",
            "key b'hi': allocwatch reads only text, integer and boolean keys",
        ),
    ],
)
def test_keys_are_named_as_the_engine_names_them(text: str, expected: object) -> None:
    """sigs.k8s.io/yaml turns int and bool keys into text; float and binary keys are refused."""
    if isinstance(expected, str):
        with pytest.raises(DocumentError, match=re.escape(expected)):
            parse_document(text)
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
def test_a_document_with_float_or_binary_keys_is_refused_and_left_alone(
    tmp_path: Path, text: str
) -> None:
    """Refused at the load, so the publisher never rewrites a file it cannot name."""
    path = tmp_path / "overrides.yaml"
    path.write_text(text)
    with pytest.raises(DocumentError, match="reads only text, integer and boolean keys"):
        parse_document(text)
    with pytest.raises(PublishError, match="leaving it untouched"):
        OverridesPublisher(path).publish(wanted({0: MemoryReading(1, 2)}))
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('devices: {1.0: {}, "1": {}}', "integer and boolean keys"),
        ('all: {y: 1, "true": 2}', "duplicate key"),
        ("all: {1: a, 0x1: b}", "duplicate key"),
    ],
)
def test_two_keys_the_engine_names_alike_are_refused(text: str, needle: str) -> None:
    with pytest.raises(DocumentError, match=needle):
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
        (ALIAS_BOMB, "aliases expand the document past 20000 nodes"),
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
        ("all: {? [a, b]\n  : 1}\n", "reads only text, integer and boolean keys"),
        ("all: {? {a: 1}\n  : 1}\n", "reads only text, integer and boolean keys"),
        ("all: {!!binary /w==: 1}\n", "reads only text, integer and boolean keys"),  # not UTF-8
        ("devices: {18446744073709551615: {}}\n", "out of range"),
        ("version: 18446744073709551615\n", "version"),
        ("version: 1.5\n", "version"),
    ],
)
def test_rejects_what_would_break_the_file(text: str, needle: str) -> None:
    with pytest.raises(DocumentError, match=needle):
        parse_document(text)


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
    with pytest.raises(DocumentError, match="set twice through a merge"):
        parse_document(text)


def test_reading_the_document_does_not_load_grpc() -> None:
    # The e2e reader parses the file inside the watcher's pod, under its CPU
    # limit; grpc's import alone would cost it seconds a read.
    code = "import sys, allocwatch.document; sys.exit('grpc' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_large_document_without_aliases_is_refused_for_its_size_not_for_aliases() -> None:
    text = "all:\n" + "".join(f"  k{i}: 1\n" for i in range(15_000))
    with pytest.raises(DocumentError) as refused:
        parse_document(text)
    assert str(refused.value) == (
        "more than 20000 nodes (keys, values, lists and maps); "
        "allocwatch reads documents of up to 20000"
    )


def test_tagged_nodes_count_toward_the_bound_too() -> None:
    text = "all: {k: [" + ", ".join(["!!str x"] * 20_001) + "]}\n"
    with pytest.raises(DocumentError, match="more than 20000 nodes"):
        parse_document(text)


def test_a_document_just_under_the_node_bound_is_read() -> None:
    # all, its map, k, the list: four nodes besides the items; the document's map one more
    text = "all: {k: [" + ", ".join(["1"] * (20_000 - 5)) + "]}\n"
    assert len(parse_document(text)["all"]["k"]) == 20_000 - 5
