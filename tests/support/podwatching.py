"""What the pod watch's tests read of it: what it logged and what it served."""

from __future__ import annotations

import threading
from typing import Any

import pytest

DEADLINE = 30.0  # seconds a condition may take to come true; only a failure waits it out


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
