"""The nvml-mock override document: its strict load. Pure.

Contract (shared with the engine and `nvml-mock-ctl`):
* The document is strict: top-level keys are only `version` (an int), `all`
  and `devices`; duplicate keys are errors, and so are aliases that contain
  themselves or expand the document past MAX_EXPANDED_NODES; so are files
  over sharedfile.MAX_DOCUMENT_BYTES and documents over goyaml.MAX_NODES. A
  document we cannot parse is never overwritten: it may be a human's edit,
  and the engine keeps serving its last good copy meanwhile.
* The file is mode FILE_MODE, whoever writes it.

Which keys are ours is `ownedkeys`; the file itself (lock, atomic write,
bounded read) is `sharedfile`; rendering is `render`.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from allocwatch import goscalars, goyaml

TOP_LEVEL_KEYS = frozenset({"version", "all", "devices"})
FILE_MODE = 0o644

Document = dict[str, Any]


class DocumentError(ValueError):
    """The file on disk is not a valid override document; it is left alone."""


class _StrictLoader(goyaml.GoYamlLoader):
    """go-yaml v2's scalars, and keys checked as UnmarshalStrict checks them.

    Keys get the text sigs.k8s.io/yaml gives them (`1:` is "1", `y:` is
    "true"), and a key may appear once, as strict go-yaml requires. Keys
    other than text, int64 and bool are refused: a null key the engine
    refuses too; float and `!!binary` keys it would rename, which we do not.

    Timestamps stay strings, as the engine reads them; a string survives our
    round trip unchanged (the dumper quotes it again).
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Keyed by the engine's names from the start: in a plain dict False
        # and 0 (or True and 1) would become one key.
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            mark = key_node.start_mark
            if isinstance(key, int) and not isinstance(key, bool) and not goscalars.is_int64(key):
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key} is out of range", mark
                )
            text = goscalars.go_text(key)  # so `1:` and `"1":` are the same key, as in Go
            if key is None:
                raise yaml.constructor.ConstructorError(None, None, "a null key", mark)
            if text is None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r}: allocwatch reads only text, integer and boolean keys",
                    mark,
                )
            if text in mapping:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {text!r}", mark)
            mapping[text] = self.construct_object(value_node, deep=deep)
        return mapping


# go-yaml refuses a document whose aliases expand it far beyond its text, and
# so does the engine; we rebuild every aliased map as its own copy, so without
# a bound a few lines of aliases would take our memory. The same bound as
# the parser's: only aliases can take a document past it here.
MAX_EXPANDED_NODES = goyaml.MAX_NODES
# Our YAML emitter recurses per level and gives up near 330; real documents
# are five levels deep. A deeper one is refused (and left alone) at the load.
MAX_DEPTH = 100


def _unaliased_copy(value: Any) -> Any:
    """Copy of a parsed document in which no map or list is shared.

    Raises DocumentError for a document that aliases expand past
    MAX_EXPANDED_NODES, or one nested past MAX_DEPTH. (goyaml.load has refused
    an alias that contains itself.)
    """
    budget = MAX_EXPANDED_NODES

    def rebuild(node: Any, depth: int) -> Any:
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise DocumentError(f"aliases expand the document past {MAX_EXPANDED_NODES} nodes")
        if isinstance(node, float) and not math.isfinite(node):
            # the engine reads the file through JSON, which has no inf or nan
            raise DocumentError(f"{node!r}: the engine cannot read a non-finite number")
        if not isinstance(node, dict | list):
            return node
        if depth >= MAX_DEPTH:
            raise DocumentError(f"nested too deeply to rewrite (over {MAX_DEPTH} levels)")
        if isinstance(node, list):
            return [rebuild(v, depth + 1) for v in node]
        return {k: rebuild(v, depth + 1) for k, v in node.items()}  # keys: named by the loader

    return rebuild(value, 0)


def count_nodes(doc: Any) -> int:
    """The nodes goyaml counts when it reads `doc` written out: every key, value, list and map.

    The write side's half of goyaml.MAX_NODES: a document we would refuse to
    read back is never written.
    """
    count = 0
    stack = [doc]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            count += len(node)  # its keys
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def parse_document(text: str) -> Document:
    """Strictly parse override YAML (or JSON). A blank file is an empty document."""
    try:
        doc = goyaml.load(text, _StrictLoader)
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise DocumentError(f"the document must be a mapping, not {type(doc).__name__}")
        doc = _unaliased_copy(doc)
    except goyaml.TooManyNodes as exc:
        raise DocumentError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"not valid YAML: {exc}") from exc
    except RecursionError:
        raise DocumentError("nested too deeply to read") from None
    respelled = sorted(
        k
        for k in doc
        if isinstance(k, str) and k not in TOP_LEVEL_KEYS and k.lower() in TOP_LEVEL_KEYS
    )
    if respelled:
        # Go matches field names case-insensitively, so the engine reads these;
        # we do not merge spellings and rewrite, so the file is left to a human.
        raise DocumentError(
            f"top-level key(s) {', '.join(respelled)}: the engine reads them, but allocwatch "
            "rewrites only the lower-case spellings all, devices and version"
        )
    unknown = sorted(str(k) for k in doc if k not in TOP_LEVEL_KEYS)
    if unknown:
        raise DocumentError(
            f"unknown top-level key(s) {', '.join(unknown)} (allowed: all, devices, version)"
        )
    version = doc.get("version")
    if version is not None:
        number = goscalars.json_int(version)  # what Go's int field makes of it
        if number is None or not goscalars.is_int64(number):
            raise DocumentError(f"`version` must be an integer, not {version!r}")
        doc["version"] = number
    for key in ("all", "devices"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise DocumentError(f"`{key}` must be a mapping, not {type(doc[key]).__name__}")
    for name, bucket in (doc.get("devices") or {}).items():
        if bucket is not None and not isinstance(bucket, dict):
            raise DocumentError(f"devices[{name!r}] must be a mapping")
    return doc
