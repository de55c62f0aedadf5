"""Wall-clock durations of the run's phases and tests, printed at the end of the session."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES: dict[str, float] = {}
TESTS: dict[str, dict[str, float]] = {}
NOTES: list[tuple[str, float]] = []
SESSION_START = time.monotonic()


def note(label: str, seconds: float) -> None:
    """Record a latency a test measured, for the end-of-run summary."""
    NOTES.append((label, seconds))


@contextmanager
def phase(name: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        PHASES[name] = PHASES.get(name, 0.0) + time.monotonic() - start


def summary() -> list[str]:
    """Session phases, then per test: the test body and its fixtures' setup + teardown.

    The first test's fixture time includes the session-wide deploy (also shown alone).
    """
    lines = ["e2e durations (s):     call  fixtures"]
    lines += [f"  {'':>7}  {seconds:8.1f}  [{name}]" for name, seconds in PHASES.items()]
    for nodeid, whens in TESTS.items():
        fixtures = whens.get("setup", 0.0) + whens.get("teardown", 0.0)
        lines.append(f"  {whens.get('call', 0.0):7.1f}  {fixtures:8.1f}  {nodeid}")
    lines.append(f"  {time.monotonic() - SESSION_START:7.1f}  total (session wall time)")
    if NOTES:
        lines.append("measured latencies (s):")
        lines += [f"  {seconds:7.2f}  {label}" for label, seconds in NOTES]
    return lines
