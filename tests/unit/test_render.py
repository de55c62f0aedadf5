"""Rendering: what we write reads back as the engine reads it, and the template is exact."""

from __future__ import annotations

import random
from typing import Any

import pytest

from allocwatch import render as render_module
from allocwatch.document import parse_document
from allocwatch.ownedkeys import apply
from allocwatch.reconcile import MemoryReading
from allocwatch.render import DocumentRenderer, render_document
from tests.support.documents import wanted

R = MemoryReading

# Strings go-yaml v2 (the engine's parser) resolves as numbers when plain,
# though PyYAML's resolver does not: a Go writer quotes them, and so must we.
GO_NUMBERS = ["1e3", "1E+3", "-1.5e3", "+.5e-2", "1_0e3", "0o17", "0O17", "0X1F", "0B11"]
GO_STRINGS = ["1e", "e3", "0o9", "0x", "1.2.3", "v1e3", "1e3x"]


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
        "%", "%d", "50% used", "%%s", "a long string " * 12, render_module._INTEGER_MARK,
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
    render = DocumentRenderer()
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
        [5, render_module._INTEGER_MARK, 6],  # our mark in someone else's text
    ],
)
def test_the_renderer_notices_a_value_that_is_no_longer_an_integer(values: list[Any]) -> None:
    render = DocumentRenderer()
    for doc in [{"all": {"x": v}} for v in values] + [{"all": {"x": [v, 9]}} for v in values]:
        assert render(doc) == render_document(doc)
    marked_key = {"all": {render_module._INTEGER_MARK: 1}}
    assert render(marked_key) == render_document(marked_key)


def _counting_full_renders(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    full_renders: list[dict[str, Any]] = []
    real = render_module.render_document
    monkeypatch.setattr(
        render_module, "render_document", lambda doc: full_renders.append(doc) or real(doc)
    )
    return full_renders


def test_the_renderer_renders_a_shape_once(monkeypatch: pytest.MonkeyPatch) -> None:
    render = DocumentRenderer()
    full_renders = _counting_full_renders(monkeypatch)
    docs = [apply({"all": {"x": 1.5}}, wanted({0: R(used, 80 - used)})) for used in (0, 40, 80)]
    texts = [render(doc) for doc in docs]
    assert len(full_renders) == 2  # the device's entry, and the rest around it
    assert texts == [render_document(doc) for doc in docs]
    render(apply(docs[0], wanted({1: R(0, 80)})))  # a new device: its entry, and a new rest
    assert len(full_renders) == 4


def test_a_device_whose_keys_change_shape_is_rendered_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    render = DocumentRenderer()
    full_renders = _counting_full_renders(monkeypatch)
    doc = apply({"all": {"x": 1.5}}, wanted({i: R(0, 80) for i in range(12)}))
    render(doc)
    before = len(full_renders)
    changed = {**doc, "devices": {**doc["devices"], "10": {**doc["devices"]["10"], "y": "z"}}}
    assert render(changed) == render_document(changed)
    assert [list(d) for d in full_renders[before:]] == [["devices"]]
    assert list(full_renders[-1]["devices"]) == ["10"]


def _random_devices(rng: random.Random) -> dict[str, Any]:
    names = ["0", "1", "10", "2", "01", "x", "1" * 11, "\uff13"]  # the last a full-width 3
    entries: list[Any] = [{}, [], "allocwatch-device-5b0d-1", None, 5]
    return {
        rng.choice(names): _random_document(rng, 1) if rng.random() < 0.7 else rng.choice(entries)
        for _ in range(rng.randrange(6))
    }


def test_the_renderer_writes_what_a_full_render_writes_device_by_device() -> None:
    rng = random.Random(11)
    render = DocumentRenderer()
    for _ in range(300):
        doc = {**_random_document(rng, 2), "devices": _random_devices(rng)}
        if rng.random() < 0.2:
            doc["all"] = {"1": render_module._DEVICE_MARK + "1", "10": 7}  # our mark, theirs
        for variant in [doc] + [_with_new_integers(doc, rng) for _ in range(3)]:
            assert render(variant) == render_document(variant)
