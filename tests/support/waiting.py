"""Waiting on a condition with a deadline, and reading what a watch logged and served."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

DEADLINE = 30.0  # seconds a condition may take to come true; only a failure waits it out


def eventually(condition: Callable[[], Any], what: str, deadline: float = DEADLINE) -> Any:
    """Poll `condition` until it is true, and return what it returned; fail past the deadline."""
    end = time.monotonic() + deadline
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline}s: {what}")
        time.sleep(0.02)


def served_at_once(source: Any) -> Any:
    """(loads(), health()) called from another thread: they must return even while the
    watch thread is stuck on the server, so they must not wait for it."""
    out: list[Any] = []
    reader = threading.Thread(target=lambda: out.append((source.loads(), source.health())))
    reader.start()
    reader.join(DEADLINE)
    assert out, "loads() or health() waited for the watch thread"
    return out[0]


def records(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    """The pod watch's log lines that contain `text`."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "allocwatch.podwatch" and text in r.getMessage()
    ]
