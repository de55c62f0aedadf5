"""Plain scalars as go-yaml v2 reads them, the text Go makes of them, and a
struct's fields as Go's JSON decoding reads them.

go-yaml v2 is the parser behind sigs.k8s.io/yaml, and so behind nvml-mock;
`goyaml` lists which documents allocwatch reads with these rules.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
MERGE = "tag:yaml.org,2002:merge"
TIMESTAMP = "tag:yaml.org,2002:timestamp"

# go-yaml v2's resolve table: exact spellings, looked up first.
_WORDS: dict[str, tuple[str, Any]] = {
    **{w: (BOOL, True) for w in ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE")},
    **{w: (BOOL, True) for w in ("on", "On", "ON")},
    **{w: (BOOL, False) for w in ("n", "N", "no", "No", "NO", "false", "False", "FALSE")},
    **{w: (BOOL, False) for w in ("off", "Off", "OFF")},
    **{w: (NULL, None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: (FLOAT, math.nan) for w in (".nan", ".NaN", ".NAN")},
    **{w: (FLOAT, math.inf) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: (FLOAT, -math.inf) for w in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
# Go's strconv.ParseInt(s, 0, 64) syntax; a leading 0 means octal.
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# Go's ParseFloat on text starting with ".", which takes `_` between digits
_DOT_FLOAT = re.compile(r"\.[0-9](_?[0-9])*([eE][-+]?[0-9](_?[0-9])*)?")


def is_int64(number: int) -> bool:
    """Whether an int fits Go's int64, the range of its int fields and int keys."""
    return -(2**63) <= number < 2**63


def json_int(value: Any) -> int | None:
    """The int Go's JSON decoding puts in an integer field (an integral float is one), else None.

    The engine reads both files through JSON, so `2.0` is 2 there; the range
    (int64, uint64, ...) is the caller's to check.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _go_int(text: str) -> int | None:
    m = _GO_INT.fullmatch(text)
    if m is None:
        return None
    sign, digits = m.groups()
    if len(digits) > 1 and digits[0] == "0" and digits[1] in "01234567":
        value = int(digits, 8)
    else:
        value = int(digits, 0)
    value = -value if sign == "-" else value
    # ParseInt, then ParseUint (which takes no sign): int64 or uint64.
    if is_int64(value) or (not sign and 0 <= value < 2**64):
        return value
    return None


def _go_float(text: str) -> float | None:
    value = float(text)
    return None if math.isinf(value) else value  # ParseFloat fails on overflow


@functools.lru_cache(maxsize=4096)
def resolve_plain(text: str) -> tuple[str, Any]:
    """The tag and value go-yaml v2 gives an unquoted scalar (timestamps stay strings)."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[:1]
    if first == ".":
        if _DOT_FLOAT.fullmatch(text):
            value = _go_float(text.replace("_", ""))
            if value is not None:
                return FLOAT, value
    elif first and first in "+-0123456789":
        plain = text.replace("_", "")
        as_int = _go_int(plain)
        if as_int is not None:
            return INT, as_int
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            value = _go_float(plain)
            if value is not None:
                return FLOAT, value
    return STR, text


def go_text(value: Any) -> str | None:
    """The text sigs.k8s.io/yaml makes of a text, int or bool scalar; None for others.

    It would make text of a float (as a float32) or `!!binary` bytes too;
    allocwatch refuses those where it needs text (keys, uuids) instead.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return None


class FieldError(ValueError):
    """A field Go's decoder would refuse; the message names it."""


def field(fields: Mapping[str, Any], name: str, where: str) -> Any:
    """The value of field `name`, whose key matches case-insensitively, as Go's does.

    A field named twice (`memory:` and `Memory:`) Go decodes twice, layering
    the two; allocwatch refuses it rather than model that layering.
    """
    lowered = name.lower()
    keys = sorted(k for k in fields if isinstance(k, str) and k.lower() == lowered)
    if len(keys) > 1:
        raise FieldError(
            f"{where} is named twice ({', '.join(keys)}); allocwatch reads each field once"
        )
    return fields[keys[0]] if keys else None


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(f"{where} must be a mapping, not {type(value).__name__}")
    return value


def struct(fields: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    return mapping(field(fields, name, where), where)


def pointer(fields: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any] | None:
    """A pointer-to-struct field (`memory`): absent or null is nil."""
    value = field(fields, name, where)
    return None if value is None else mapping(value, where)


def scalar(
    fields: Mapping[str, Any], name: str, where: str, convert: Callable[[Any, str], Any]
) -> Any:
    """A scalar field: it must decode; absent or null is None."""
    value = field(fields, name, where)
    return None if value is None else convert(value, where)


def int_field(value: Any, where: str) -> int:
    """A Go `int` field."""
    number = json_int(value)
    if number is None or not is_int64(number):
        raise FieldError(f"{where} must be an integer, not {value!r}")
    return number


def unsigned(bits: int) -> Callable[[Any, str], int]:
    def convert(value: Any, where: str) -> int:
        number = json_int(value)
        if number is None or not 0 <= number < 2**bits:
            raise FieldError(f"{where} must be a non-negative integer, not {value!r}")
        return number

    return convert


def text(value: Any, where: str) -> str:
    """A Go `string` field: sigs.k8s.io/yaml turns an int or bool into its text.

    It would format a float (as a float32) or `!!binary` bytes too; allocwatch
    refuses those, since a uuid written as a number is a mistake.
    """
    text = go_text(value)
    if text is None:
        kind = "a number" if isinstance(value, float) else f"a {type(value).__name__}"
        raise FieldError(f"{where} must be text, not {kind}; quote it")
    return text


def fields(
    block: Mapping[str, Any] | None, spec: Mapping[str, Callable[[Any, str], int]], where: str
) -> dict[str, int] | None:
    """The fields of `spec` in `block`, each decoded (0 when absent); None without a block."""
    if block is None:
        return None
    return {
        name: scalar(block, name, f"{where}.{name}", convert) or 0 for name, convert in spec.items()
    }
