"""The load a pod declares in its annotations: GPU memory and a utilization band.

Pure: a pod's annotations in, a `DeclaredLoad` and the problems found out.
A value that cannot be read gives no value for its key (the pod keeps the
defaults there) and one `Problem` naming the annotation and why. Every value
is length-checked before it is parsed, and the grammars below are plain
regular expressions over ASCII with no nested repetition, so neither time nor
memory depends on what a pod writes beyond that length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from allocwatch.activity import Band

GPU_MEMORY = "allocwatch.dev/gpu-memory"
GPU_UTILIZATION = "allocwatch.dev/gpu-utilization"
# fake-gpu-operator's, read the same way as ours; ours wins when both are set.
RUNAI_UTILIZATION = "run.ai/simulated-gpu-utilization"
ANNOTATIONS = (GPU_MEMORY, GPU_UTILIZATION, RUNAI_UTILIZATION)

# The longest value read: "123456789012.5Gi" and "100-100" are far shorter.
MAX_VALUE_LENGTH = 64
# A value shown in a problem is cut to this, so a log line stays short.
SHOWN_LENGTH = 40
MAX_MEMORY_BYTES = 2**63 - 1
# Kubernetes' decimal exponent (`1e9`); any larger one is out of range anyway.
MAX_EXPONENT = 30

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_NUMBER = r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
# A Kubernetes quantity (resource.Quantity's grammar), or a number followed
# by `%`. The exponent is tried before `E` (exa), as Kubernetes does.
_MEMORY = re.compile(
    _NUMBER + r"(?P<suffix>[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPE]|[mun]|%)?",
    re.ASCII,
)
_PERCENT = r"([0-9]+)%?"
_BAND = re.compile(rf"{_PERCENT}(?:\s*-\s*{_PERCENT})?", re.ASCII)


@dataclass(frozen=True)
class DeclaredLoad:
    """What a pod declared; None where it declared nothing readable."""

    memory_bytes: int | None = None  # from a quantity: "20Gi", "512Mi", "1.5G"
    memory_fraction: float | None = None  # of the GPU's usable memory, in (0, 1]
    utilization: Band | None = None  # percent band lo..hi within 0..100


NO_LOAD = DeclaredLoad()


@dataclass(frozen=True)
class Problem:
    """An annotation whose value was not used, and why."""

    annotation: str
    value: str  # as given, cut to SHOWN_LENGTH characters
    reason: str

    def __str__(self) -> str:
        return f"{self.annotation}={self.value!r}: {self.reason}"


T = TypeVar("T")


class _Refused(ValueError):
    pass


def parse_annotations(annotations: Mapping[str, str]) -> tuple[DeclaredLoad, list[Problem]]:
    """The load `annotations` declare, and a problem for each value not used."""
    problems: list[Problem] = []
    memory_bytes = memory_fraction = utilization = None
    memory = _read(annotations, GPU_MEMORY, _memory, problems)
    if isinstance(memory, Fraction):
        memory_fraction = float(memory)
    elif isinstance(memory, int):
        memory_bytes = memory
    key = GPU_UTILIZATION if GPU_UTILIZATION in annotations else RUNAI_UTILIZATION
    utilization = _read(annotations, key, parse_band, problems)
    return DeclaredLoad(memory_bytes, memory_fraction, utilization), problems


def _read(
    annotations: Mapping[str, str],
    key: str,
    parse: Callable[[str], T],
    problems: list[Problem],
) -> T | None:
    if key not in annotations:
        return None
    value = annotations[key]
    if not isinstance(value, str):
        problems.append(Problem(key, _shown(repr(value)), "is not a string"))
        return None
    if len(value) > MAX_VALUE_LENGTH:
        reason = f"is {len(value)} characters long; at most {MAX_VALUE_LENGTH} are read"
        problems.append(Problem(key, _shown(value), reason))
        return None
    try:
        return parse(value.strip(" \t"))
    except _Refused as refused:
        problems.append(Problem(key, _shown(value), str(refused)))
        return None


def _shown(value: str) -> str:
    return value if len(value) <= SHOWN_LENGTH else value[:SHOWN_LENGTH] + "..."


def _memory(text: str) -> int | Fraction:
    """Bytes (an int) from a quantity, or a share of the usable memory (a Fraction)."""
    m = _MEMORY.fullmatch(text)
    if m is None or not (m["int"] or m["frac"]):
        raise _Refused("expected a quantity such as 20Gi or 512Mi, or a fraction such as 0.75")
    suffix = m["suffix"] or ""
    if m["sign"] == "-":
        raise _Refused("must not be negative")
    number = Fraction(int((m["int"] or "0") + (m["frac"] or "")), 10 ** len(m["frac"] or ""))
    if suffix == "%":
        if not 0 < number <= 100:
            raise _Refused("a percentage of the usable memory must be above 0% and at most 100%")
        return number / 100
    if not suffix:
        if number > 1:
            shown = text.rstrip(".")
            raise _Refused(
                "a number above 1 is not a fraction of the memory: give a unit, "
                f"such as {shown}Mi, {shown}Gi or {shown}G"
            )
        if number == 0:
            raise _Refused("a fraction must be above 0 (0Mi declares no memory)")
        return number
    if suffix in ("m", "u", "n"):
        raise _Refused(f"{suffix!r} is a fraction of a byte: use Mi or M for mebi- or megabytes")
    scale = _BINARY.get(suffix) or _DECIMAL.get(suffix)
    if scale is None:  # a decimal exponent, e[+-]digits
        exponent = int(suffix[1:])
        if abs(exponent) > MAX_EXPONENT:
            raise _Refused(f"the exponent must be within +-{MAX_EXPONENT}")
        number *= Fraction(10) ** exponent
    else:
        number *= scale
    # Kubernetes rounds a fractional byte count up.
    whole = -(-number.numerator // number.denominator)
    if whole > MAX_MEMORY_BYTES:
        raise _Refused(f"is more than {MAX_MEMORY_BYTES} bytes")
    return whole


def parse_band(text: str) -> Band:
    """A utilization band from `85`, `60-90` or `85%`; ValueError saying why not.

    The one reading of a band: annotations and --busy-utilization alike.
    """
    m = _BAND.fullmatch(text)
    if m is None:
        raise _Refused("expected a whole percentage (85) or a band (60-90), within 0-100")
    lo = int(m[1])
    hi = lo if m[2] is None else int(m[2])
    if max(lo, hi) > 100:
        raise _Refused(f"{max(lo, hi)} is above 100%")
    if lo > hi:
        raise _Refused(f"the band is upside down: write {hi}-{lo}")
    return Band(lo, hi)
