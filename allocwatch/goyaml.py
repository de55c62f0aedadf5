"""YAML read the way nvml-mock reads it: go-yaml v2's scalars, refusals as YAMLError.

nvml-mock parses `config.yaml` and `overrides.yaml` with sigs.k8s.io/yaml,
which resolves unquoted scalars by go-yaml v2's rules rather than PyYAML's
YAML 1.1 ones. A value we misread would be written back changed (a quoted "y"
is a string to the engine, and a value of the wrong type freezes that device's
overrides), and a misread profile field would give us other devices than the
engine serves. This module keeps exactly what real documents need:

* plain scalars as go-yaml v2 reads them: `y`/`n`/`on`/`off` are booleans,
  `1e3` and `08` floats, `0o17`, `0x1F` and `017` ints, and `1:30`, `=` and
  timestamps plain strings;
* explicit tags (`!!int`, `!!str`, ...) as go-yaml takes them, and unknown
  tags as the untagged value;
* `<<` merges, anchors and aliases, only the first document of a stream;
* keys that are text, ints (as their decimal text) and bools ("true").

And refuses, through YAMLError, what real documents do not need and go-yaml
would read in a way of its own: a key set twice through a merge (go-yaml
layers them in its own order), any `%YAML` directive, an alias that contains
itself. Float and `!!binary` keys, which Go would rename, are refused by the
callers (overrides, profile), which need every key as text.
"""

from __future__ import annotations

from typing import Any

import yaml

from allocwatch.goscalars import (
    BOOL,
    FLOAT,
    INT,
    MERGE,
    NULL,
    STR,
    TIMESTAMP,
    is_int64,
    resolve_plain,
)

_LoaderBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Real documents hold under a thousand nodes (keys, values, lists, maps). The
# bound is counted while the parser builds them, so a document of tiny nodes
# is refused before it costs more than this many, in memory or time; a byte
# bound alone would still let a file of `[1,1,1,...]` build a node per two bytes.
MAX_NODES = 20_000


class TooManyNodes(yaml.YAMLError):
    """The document holds more than MAX_NODES nodes; reading stopped there."""

    def __init__(self) -> None:
        super().__init__(
            f"more than {MAX_NODES} nodes (keys, values, lists and maps); "
            f"allocwatch reads documents of up to {MAX_NODES}"
        )


class GoYamlLoader(_LoaderBase):  # type: ignore[misc,valid-type]
    """A safe loader whose scalars are go-yaml v2's; use `load` for its errors."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._flattening: set[int] = set()  # maps whose merges are being expanded
        self._nodes = 0

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        # The parser calls this once per node it builds, tagged or not (not per alias).
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise TooManyNodes
        super().descend_resolver(current_node, current_index)

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return resolve_plain(value)[0]
        return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]

    def _explicit(self, node: yaml.Node, tags: tuple[str, ...]) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return self.construct_untagged(node)
        text = self.construct_scalar(node)
        tag, value = resolve_plain(text)
        if tag not in tags:
            short = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {text!r} as {short}", node.start_mark
            )
        return value

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Expand `<<` merges; refuse a key a merge would override or be overridden by.

        go-yaml layers such keys in an order of its own (a key after a merge
        wins, in a list of maps the first); allocwatch does not repeat that.
        """
        if id(node) in self._flattening:  # go-yaml: "anchor ... value contains itself"
            raise yaml.constructor.ConstructorError(
                None, None, "a merge (<<) brings in the map that contains it", node.start_mark
            )
        self._flattening.add(id(node))
        try:
            self._flatten(node)
        finally:
            self._flattening.discard(id(node))

    def _flatten(self, node: yaml.MappingNode) -> None:
        flat: list[tuple[yaml.Node, yaml.Node]] = []
        merged = False
        for key_node, value_node in node.value:
            if key_node.tag != MERGE:
                flat.append((key_node, value_node))
                continue
            merged = True
            parts = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for part in parts:
                if not isinstance(part, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        None, None, "a merge (<<) needs a map or a list of maps", part.start_mark
                    )
                self.flatten_mapping(part)
                flat.extend(part.value)
        if merged:
            seen: set[tuple[str, str]] = set()
            for key_node, _ in flat:
                if isinstance(key_node, yaml.ScalarNode):
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"key {key_node.value!r} is set twice through a merge (<<); "
                            "allocwatch does not layer merged keys",
                            key_node.start_mark,
                        )
                    seen.add(key)
        node.value = flat

    def construct_untagged(self, node: yaml.Node) -> Any:
        """What go-yaml makes of a node whatever its tag: a list, a map, or the text.

        go-yaml decodes a list or map by its kind alone (`!!omap [a: 1]` is a
        list of maps, `!!set {a}` a map, `!!str {a: 1}` a map), and reads a
        scalar with a tag it does not know (`!foo 12`) as its text.
        """
        if isinstance(node, yaml.SequenceNode):
            return self.construct_sequence(node, deep=True)
        if isinstance(node, yaml.MappingNode):
            return self.construct_mapping(node, deep=True)
        return self.construct_scalar(node)

    def construct_local_tag(self, suffix: str, node: yaml.Node) -> Any:
        return self.construct_untagged(node)

    def construct_go_bool(self, node: yaml.ScalarNode) -> Any:
        return self._explicit(node, (BOOL,))

    def construct_go_int(self, node: yaml.ScalarNode) -> Any:
        return self._explicit(node, (INT,))

    def construct_go_float(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return self.construct_untagged(node)
        value = self._explicit(node, (FLOAT, INT))
        if isinstance(value, int) and not is_int64(value):
            # go-yaml lets !!float take an int64, not a uint64
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {value} as !!float", node.start_mark
            )
        return float(value)

    def construct_go_null(self, node: yaml.ScalarNode) -> Any:
        return self._explicit(node, (NULL,))

    def construct_go_timestamp(self, node: yaml.Node) -> Any:
        # Only an explicit `!!timestamp` gets here; the engine reads it as text.
        if not isinstance(node, yaml.ScalarNode):
            return self.construct_untagged(node)
        text = self.construct_scalar(node)
        if not yaml.constructor.SafeConstructor.timestamp_regexp.match(text):
            raise yaml.constructor.ConstructorError(
                None, None, f"{text!r} is not a timestamp", node.start_mark
            )
        return text


GoYamlLoader.add_constructor(BOOL, GoYamlLoader.construct_go_bool)
GoYamlLoader.add_constructor(INT, GoYamlLoader.construct_go_int)
GoYamlLoader.add_constructor(FLOAT, GoYamlLoader.construct_go_float)
GoYamlLoader.add_constructor(TIMESTAMP, GoYamlLoader.construct_go_timestamp)
GoYamlLoader.add_constructor(NULL, GoYamlLoader.construct_go_null)
# `<<` merges only as a key (flatten_mapping); as a value go-yaml reads the text.
for _tag in (STR, MERGE, *(f"tag:yaml.org,2002:{t}" for t in ("omap", "pairs", "set"))):
    GoYamlLoader.add_constructor(_tag, GoYamlLoader.construct_untagged)
GoYamlLoader.add_constructor(None, GoYamlLoader.construct_untagged)
GoYamlLoader.add_multi_constructor("!", GoYamlLoader.construct_local_tag)


def _refuse_directives(text: str) -> None:
    """Refuse a `%YAML` directive: go-yaml takes only 1.1, and real documents carry none."""
    for line in text.lstrip("\ufeff").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith("%"):
            return  # directives come only before the first document
        if line.startswith("%YAML"):
            raise yaml.YAMLError(
                f"{line.strip()}: allocwatch reads documents without a %YAML directive"
            )


def _contains_itself(doc: Any) -> bool:
    """Whether an alias makes a map or list contain itself, which go-yaml refuses.

    PyYAML builds such a node as a cycle; go-yaml fails the whole document
    ("anchor 'a' value contains itself"). Shared nodes without a cycle are fine.
    """
    done: set[int] = set()  # nodes whose every descendant has been checked
    ancestors: set[int] = set()
    # An explicit stack, not recursion: a deep document must not end the watcher.
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            ancestors.discard(id(node))
            done.add(id(node))
            continue
        if not isinstance(node, dict | list) or id(node) in done:
            continue
        if id(node) in ancestors:
            return True
        ancestors.add(id(node))
        stack.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, False) for child in children)
    return False


def load(text: str, loader: type[GoYamlLoader] = GoYamlLoader) -> Any:
    """Parse the first document. Every refusal is a yaml.YAMLError, never another exception.

    go-yaml reads only the first document of a stream and never looks past it,
    so a `---` and whatever follows it are ignored here too.
    PyYAML's remaining constructors (`!!binary`, `!!set`, `!!omap`, ...) raise
    plain Python errors on bad input; those become YAMLError here too, so a
    malformed file is refused and retried rather than ending the watcher.
    An alias that makes a map or list contain itself is refused, as go-yaml
    refuses it, so no caller meets a cycle.
    """
    _refuse_directives(text)
    parser = loader(text)
    try:
        doc = parser.get_data()
    except yaml.YAMLError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        raise yaml.YAMLError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        parser.dispose()
    if _contains_itself(doc):
        raise yaml.YAMLError("an alias refers to a map or list that contains it")
    return doc
