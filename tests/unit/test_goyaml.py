"""go-yaml v2's reading of scalars, which nvml-mock applies to both of its files."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from allocwatch import goyaml

# What go-yaml v2's resolve() gives each unquoted scalar (timestamps are read
# as text by sigs.k8s.io/yaml, so they stay strings).
GO_READINGS: list[tuple[str, Any]] = [
    ("y", True), ("Y", True), ("yes", True), ("On", True), ("TRUE", True),
    ("n", False), ("N", False), ("no", False), ("off", False), ("False", False),
    ("yEs", "yEs"), ("tRue", "tRue"),
    ("~", None), ("null", None), ("NULL", None), ("", None),
    ("0", 0), ("00", 0), ("+0", 0), ("-1", -1), ("1_000", 1000), ("017", 15), ("-017", -15),
    ("0o17", 15), ("0O17", 15), ("0x1F", 31), ("0X1F", 31), ("0x_1F", 31), ("0b101", 5),
    ("-0b101", -5), ("9223372036854775807", 2**63 - 1), ("18446744073709551615", 2**64 - 1),
    ("08", 8.0), ("1e3", 1000.0), ("9e1", 90.0), ("8.5e1", 85.0), ("1.", 1.0), (".5", 0.5),
    ("-.5", -0.5), ("+.5e-2", 0.005), (".5_0", 0.5), (".5e1_0", 5e9), ("._5", "._5"),
    ("18446744073709551616", 2.0**64), ("-9223372036854775809", -(2.0**63)),
    (".inf", math.inf), ("+.Inf", math.inf), ("-.INF", -math.inf),
    ("1e400", "1e400"), ("0x", "0x"), ("0o9", "0o9"), ("1:30", "1:30"), ("=", "="),
    ("2001-12-14", "2001-12-14"), ("+", "+"), (".", "."), ("1.2.3", "1.2.3"),
    ("0x1p-2", "0x1p-2"), ("_1", "_1"), ("abc", "abc"), ("<<", "<<"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), GO_READINGS)
def test_plain_scalars_read_as_go_yaml_v2_reads_them(text: str, expected: Any) -> None:
    value = goyaml.load(f"k: {text}\n")["k"]
    assert type(value) is type(expected)
    assert value == expected


def test_nan_is_a_float() -> None:
    assert math.isnan(goyaml.load("k: .NaN\n")["k"])


@pytest.mark.parametrize("text", ["'y'", '"1e3"', "'0o17'", "!!str 017", '""'])
def test_quoted_or_str_tagged_scalars_stay_strings(text: str) -> None:
    assert isinstance(goyaml.load(f"k: {text}\n")["k"], str)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!!int 0x1F", 31),
        ("!!float 1", 1.0),
        ("!!bool y", True),
        ("!!timestamp 2001-12-14", "2001-12-14"),
    ],
)
def test_explicit_tags_take_what_go_yaml_takes(text: str, expected: Any) -> None:
    value = goyaml.load(f"k: {text}\n")["k"]
    assert type(value) is type(expected)
    assert value == expected


@pytest.mark.parametrize(
    "text",
    [
        "!!int abc",
        "!!int ''",
        "!!int 1.5",
        "!!float abc",
        "!!float 18446744073709551615",
        "!!bool maybe",
        "!!timestamp abc",
        "!!null foo",
    ],
)
def test_explicit_tags_go_yaml_refuses_are_yaml_errors(text: str) -> None:
    with pytest.raises(yaml.YAMLError, match="line 1"):
        goyaml.load(f"k: {text}\n")


def test_any_constructor_failure_is_a_yaml_error() -> None:
    class Loader(goyaml.GoYamlLoader):
        pass

    def fail(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        raise ValueError("bad value")

    Loader.add_constructor("!fails", fail)
    with pytest.raises(yaml.YAMLError, match="ValueError: bad value"):
        goyaml.load("k: !fails x\n", Loader)


def test_merge_keys_still_merge() -> None:
    assert goyaml.load("a: &a {x: 1}\nb: {<<: *a, z: 2}\n")["b"] == {"x": 1, "z": 2}


def test_keys_are_scalars_like_any_other() -> None:
    # go-yaml reads a `y:` key as true too; sigs.k8s.io/yaml then names it "true".
    assert goyaml.load("y: 1\n0x2: 2\n") == {True: 1, 2: 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # go-yaml would layer these in an order of its own; refused instead
        ("a: &a {x: 1}\nb: {<<: *a, x: 2}\n", "key 'x' is set twice through a merge"),
        ("a: &a {x: 1}\nb: {x: 2, <<: *a}\n", "key 'x' is set twice through a merge"),
        ("a: &a {x: 1}\nc: &c {x: 3, z: 3}\nb: {<<: [*a, *c]}\n", "key 'x' is set twice"),
        ("a: &a {x: 1}\nc: &c {w: 3, z: 3}\nb: {<<: [*c, *a]}\n", {"x": 1, "w": 3, "z": 3}),
    ],
)
def test_merges_that_would_layer_a_key_are_refused(text: str, expected: Any) -> None:
    if isinstance(expected, str):
        with pytest.raises(yaml.YAMLError, match=expected):
            goyaml.load(text)
        return
    assert goyaml.load(text)["b"] == expected


@pytest.mark.parametrize("value", ["1", "[1]", "[{x: 1}, 2]"])
def test_a_merge_of_anything_but_maps_is_refused(value: str) -> None:
    with pytest.raises(yaml.YAMLError, match="a merge"):
        goyaml.load(f"b: {{<<: {value}}}\n")


@pytest.mark.parametrize(
    ("tail", "expected"),
    [("---\n", {"a": 1}), ("---\nb: 2\n", {"a": 1}), ("...\n---\nfoo: [\n", {"a": 1})],
)
def test_only_the_first_document_is_read(tail: str, expected: Any) -> None:
    assert goyaml.load("a: 1\n" + tail) == expected


def test_an_empty_stream_is_null() -> None:
    assert goyaml.load("") is None
    assert goyaml.load("# nothing\n") is None


def test_unknown_tags_read_as_the_untagged_value() -> None:
    doc = goyaml.load("a: !custom GPU-a\nb: !n 12\nc: !m {x: 1}\nd: !l [1, y]\n")
    assert doc == {"a": "GPU-a", "b": "12", "c": {"x": 1}, "d": [1, True]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!!omap [b: 1, c: 2]", [{"b": 1}, {"c": 2}]),
        ("!!pairs [b: 1]", [{"b": 1}]),
        ("!!set {x, z}", {"x": None, "z": None}),
        ("!!str {b: 1}", {"b": 1}),
        ("!!int [1]", [1]),
        ("!!float {b: 1}", {"b": 1}),
        ("!!timestamp [1]", [1]),
        ("!!python/none x", "x"),
    ],
)
def test_lists_and_maps_decode_by_kind_whatever_their_tag(text: str, expected: Any) -> None:
    assert goyaml.load(f"a: {text}\n") == {"a": expected}


@pytest.mark.parametrize("directive", ["%YAML 1.2", "%YAML 2.0", "# c\n%YAML 1.0"])
def test_a_yaml_directive_is_refused(directive: str) -> None:
    with pytest.raises(yaml.YAMLError, match="reads documents without a %YAML directive"):
        goyaml.load(f"{directive}\n---\na: 1\n")


def test_even_a_yaml_1_1_directive_is_refused_but_a_tag_directive_is_read() -> None:
    with pytest.raises(yaml.YAMLError, match=r"%YAML 1\.1: allocwatch reads documents without"):
        goyaml.load("%YAML 1.1\n%TAG !e! tag:example.com,2000:\n---\na: 1\n")
    assert goyaml.load("%TAG !e! tag:example.com,2000:\n---\na: 1\n") == {"a": 1}


@pytest.mark.parametrize("text", ["a: &a {<<: *a}\n", "a: &a {x: 1, <<: [{y: 2}, *a]}\n"])
def test_a_merge_of_its_own_map_is_refused_not_a_recursion(text: str) -> None:
    with pytest.raises(yaml.YAMLError, match="brings in the map that contains it"):
        goyaml.load(text)


@pytest.mark.parametrize("text", ["a: &x [*x]\n", "a: &x {b: [1, {c: *x}]}\n"])
def test_an_alias_that_contains_itself_is_refused(text: str) -> None:
    # go-yaml: "anchor 'x' value contains itself"; a cycle would reach no caller
    with pytest.raises(yaml.YAMLError, match="contains it"):
        goyaml.load(text)


def test_a_node_shared_through_aliases_is_loaded() -> None:
    doc = goyaml.load("a: &x [1]\nb: *x\nc: [*x, {d: *x}]\n")
    assert doc == {"a": [1], "b": [1], "c": [[1], {"d": [1]}]}
