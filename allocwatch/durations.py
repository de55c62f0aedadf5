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
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Return seconds for a Go duration string or a plain number of seconds.

    Raises ValueError with a message fit for a CLI error.
    """
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise ValueError(f"{text!r} is not a finite duration")
        return value
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(
                f"{text!r} is not a duration (examples: 500ms, 2s, 1m30s, or seconds such as 0.5)"
            )
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


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
