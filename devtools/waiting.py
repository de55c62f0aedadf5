"""Polling with a deadline; a timeout carries the diagnostics of the moment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    pass


class WaitAbort(AssertionError):
    """Raised by a condition that can no longer come true (a pod that failed): ends the wait."""


def wait_until(
    condition: Callable[[], T | None],
    timeout: float = 10.0,
    what: str = "the condition",
    *,
    interval: float = 0.05,
    diagnostics: Callable[[], str] | None = None,
) -> T:
    """Return the first truthy value of `condition()`; raise WaitTimeout after `timeout` s.

    Exceptions from `condition` count as "not yet" until the deadline, when the
    last one is reported; WaitAbort ends the wait at once, with the diagnostics.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
        except WaitAbort as exc:
            message = f"gave up waiting for {what}: {exc}"
            if diagnostics is not None:
                message += "\n" + diagnostics()
            raise WaitAbort(message) from exc
        except Exception as exc:
            last_error, value = exc, None
        if value:
            return value
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout:g}s waiting for {what}"
            if last_error is not None:
                message += f"\nlast error: {type(last_error).__name__}: {last_error}"
            if diagnostics is not None:
                message += "\n" + diagnostics()
            raise WaitTimeout(message)
        time.sleep(interval)
