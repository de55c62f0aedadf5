"""Go-style durations (`500ms`, `2s`, `1m30s`), as upstream's flags accept them."""

from __future__ import annotations

import math
import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# ASCII digits only: Python's \d and float() also take other scripts' digits
# and `1_0`, which Go's ParseDuration refuses.
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_SECONDS = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")


def parse_duration(text: str) -> float:
    """Return seconds for a Go duration string or a plain number of seconds.

    Raises ValueError with a message fit for a CLI error.
    """
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    if _SECONDS.fullmatch(s):
        value = float(s)
        if not math.isfinite(value):
            raise ValueError(f"{text!r} is not a finite duration")
        return value
    sign = -1.0 if s[0] == "-" else 1.0
    body = s[1:] if s[0] in "+-" else s
    not_a_duration = ValueError(
        f"{text!r} is not a duration (examples: 500ms, 2s, 1m30s, or seconds such as 0.5)"
    )
    if not body:
        raise not_a_duration
    pos = 0
    total = 0.0
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None:
            raise not_a_duration
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """Format like Go's Duration.String() for the values our flags take."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1e3
        return f"{ms:g}ms"
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    return out + f"{secs:g}s"
