"""Rendering an override document as YAML the engine reads as we meant it."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import yaml

from allocwatch import goscalars

_DumperBase: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


_SCALAR_RESOLVER = yaml.resolver.Resolver()  # the implicit tags SafeDumper uses


@functools.lru_cache(maxsize=4096)
def _scalar_tag(value: str, implicit: tuple[bool, bool]) -> str:
    return _SCALAR_RESOLVER.resolve(yaml.ScalarNode, value, implicit)


class _Dumper(_DumperBase):  # type: ignore[misc,valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        # Never write anchors: parse_document rebuilds every node, so nothing
        # is shared, and the check would only cost time.
        return True

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        # The serializer asks this twice per scalar, and the answer depends
        # only on the text; the same keys recur on every write, so cached
        # rather than regex-matched each time.
        if kind is yaml.ScalarNode:
            return _scalar_tag(value, tuple(implicit))
        return super().resolve(kind, value, implicit)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # A string the engine would read as something else unquoted (`y`, `1e3`,
    # `0o17`; PyYAML's YAML 1.1 rules leave those plain) is quoted, as Go
    # writers do: read as a bool or number, it would break that device's overrides.
    if goscalars.resolve_plain(value)[0] != goscalars.STR:
        return dumper.represent_scalar(goscalars.STR, value, style='"')
    return dumper.represent_str(value)


_Dumper.add_representer(str, _represent_str)


def render_document(doc: Mapping[str, Any]) -> str:
    return yaml.dump(dict(doc), Dumper=_Dumper, default_flow_style=False, sort_keys=True)


# Stands in for each integer when a document's shape is rendered: plain text
# that YAML writes as it is, one token, so never wrapped or quoted.
_INTEGER_MARK = "allocwatch-integer-5b0d"


def _shape(node: Any, integers: list[int]) -> Any:
    """A key equal for two documents that render alike but for their integers.

    Appends the integers to `integers` in the order the render writes them.
    Leaves keep their type, so `true`, `1.0` and `1` never share a shape, and
    floats compare by their text (`-0.0` is not `0.0`).
    """
    kind = type(node)
    if kind is int:
        integers.append(node)
        return int
    if kind is dict:
        # sorted, as render_document writes them; keys are text (the loader makes them so).
        # Integer values inline: this runs for every node of every write, and
        # most values are our byte counts.
        items = []
        for key in sorted(node):
            value = node[key]
            if type(value) is int:
                integers.append(value)
                items.append((key, int))
            else:
                items.append((key, _shape(value, integers)))
        return dict, tuple(items)
    if kind is list:
        return list, tuple([_shape(item, integers) for item in node])
    return kind, repr(node) if kind is float else node


def _marked(node: Any) -> Any:
    """`node` with every integer replaced by _INTEGER_MARK."""
    kind = type(node)
    if kind is int:
        return _INTEGER_MARK
    if kind is dict:
        return {k: _marked(v) for k, v in node.items()}
    if kind is list:
        return [_marked(item) for item in node]
    return node


class _Template:
    """One document's render, reused while only its integers change."""

    def __init__(self) -> None:
        self._shape: Any = None
        self._text: str | None = None

    def __call__(self, doc: dict[str, Any]) -> str:
        integers: list[int] = []
        shape = _shape(doc, integers)
        if shape != self._shape:
            self._shape, self._text = shape, None
            text = render_document(_marked(doc))
            # Text of someone else's that contains the mark: render in full.
            if text.count(_INTEGER_MARK) == len(integers):
                self._text = text.replace("%", "%%").replace(_INTEGER_MARK, "%d")
        if self._text is None:
            return render_document(doc)
        return self._text % tuple(integers)


# Stands where a device's entry goes in the rest of the document: plain text,
# one token, like _INTEGER_MARK, then the device's name.
_DEVICE_MARK = "allocwatch-device-5b0d-"


def _device_section(name: Any, entry: Any) -> bool:
    """A device entry rendered on its own: a non-empty map under our kind of name."""
    return (
        type(name) is str
        and name.isascii()
        and name.isdigit()
        and len(name) <= 10
        and type(entry) is dict
        and bool(entry)
    )


class DocumentRenderer:
    """render_document, reusing the renders of the parts that only changed integers.

    A write nearly always changes our keys on one or two devices, and
    PyYAML's representer and emitter are most of a writing poll's own CPU.
    So each device's entry under `devices` is rendered on its own, as the
    one device of a document, and the rest of the document with a mark in
    each entry's place; the entry's lines then replace the mark's line. Each
    part's shape is rendered once, with a mark in place of each integer, and
    a part of the same shape is that text with its integers filled in: the
    same bytes as render_document. A whole-document template alone was
    rejected: a claim that comes or goes changes its device's process list,
    and so the whole document's shape, on nearly every write.
    """

    def __init__(self) -> None:
        self._rest = _Template()
        self._devices: dict[str, _Template] = {}

    def __call__(self, doc: Mapping[str, Any]) -> str:
        doc = dict(doc)
        devices = doc.get("devices")
        sections = (
            [name for name, entry in devices.items() if _device_section(name, entry)]
            if type(devices) is dict
            else []
        )
        for name in [n for n in self._devices if n not in sections]:
            del self._devices[name]
        if not sections:
            return self._rest(doc)
        assert type(devices) is dict
        marked = dict(devices)
        for name in sections:
            marked[name] = _DEVICE_MARK + name
        text = self._rest({**doc, "devices": marked})
        for name in sections:
            template = self._devices.get(name)
            if template is None:
                template = self._devices[name] = _Template()
            # "devices:\n", the name's line, then the entry's lines
            own = template({"devices": {name: devices[name]}})
            head, _, entry = own.partition("\n")[2].partition("\n")
            line = f"{head} {_DEVICE_MARK}{name}\n"
            at = text.find(line)
            mark_lines = text.count(f" {_DEVICE_MARK}{name}\n")
            if at < 0 or mark_lines != 1 or text[at - 1 : at] not in ("", "\n"):
                return render_document(doc)  # someone else's text holds the mark
            text = f"{text[:at]}{head}\n{entry}{text[at + len(line) :]}"
        return text
