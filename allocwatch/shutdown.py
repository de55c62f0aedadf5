"""Shutdown: the stop signals and event, when a signal may interrupt, the removal's time.

Light on purpose: `allocwatch` installs its first handlers from here before
anything heavy is imported, so a stop signal is a clean exit 0 from the start.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

# The signals that stop the watcher cleanly (exit 0, readings removed); SIGHUP
# too, for a watcher started from a terminal that closes.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How often a blocking grpc call returns to Python to run signal handlers.
GRPC_SIGNAL_CHECK_SECONDS = 0.2
# The readings are removed within this long of the first stop signal, leaving
# the rest of the second for the interpreter to exit.
REMOVE_READINGS_BY_SECONDS = 0.6


class Interrupted(BaseException):
    """Raised by the stop-signal handler to abandon a call in flight."""


def _exit_0(_signum: int, _frame: FrameType | None) -> None:
    sys.exit(0)


def exit_on_stop_signals() -> None:
    """Until the watcher's handlers replace these: nothing is published yet, so just exit 0."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_0)


def ignore_stop_signals() -> None:
    """Once the exit code is decided.

    Python puts the default handlers back on the way out, while grpc still
    cleans up, and a stop signal then would end the process with -SIGTERM
    rather than the code decided; an ignored signal stays ignored.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


class Stop(Protocol):
    """What work that may be abandoned asks of whoever stops it."""

    def is_set(self) -> bool:
        """Stopping: give up waiting."""

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout`, less if stopping; True when stopping."""

    def time_left(self) -> float:
        """How long a wait may still last (inf without a deadline)."""

    def interruptible(self) -> contextlib.AbstractContextManager[None]:
        """Pure work that Interrupted may cut short: a parse, a render; never a write."""


class Shutdown:
    """The stop event, set by a stop signal (or `set`), and the in-call interrupt rule.

    The handler raises Interrupted only while a blocking call runs (`call()`)
    or pure work may be dropped (`interruptible()`), never elsewhere: a write
    must not be cut in half. Neither is begun after the event is set.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        # While a signal may interrupt: how late its handler may run (else None).
        self._interrupt_late: float | None = None
        self.signalled_at: float | None = None  # time.monotonic() of the first signal

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.handle_signal)

    def handle_signal(self, _signum: int, _frame: FrameType | None) -> None:
        late = self._interrupt_late
        if self.signalled_at is None:
            # During a grpc call this runs only when grpc next checks for signals.
            self.signalled_at = time.monotonic() - (late or 0.0)
        self._event.set()
        if late is not None:
            raise Interrupted

    def time_left(self) -> float:
        return math.inf

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    def call(self) -> contextlib.AbstractContextManager[None]:
        """Mark a blocking call, for exactly its length; Interrupted if already stopping.

        Not a moment longer: an Interrupted raised while the failure of a
        call is handled (the channel closed, say) would escape the
        `except Interrupted` beside the call.
        """
        return self._interruptible(GRPC_SIGNAL_CHECK_SECONDS)

    def interruptible(self) -> contextlib.AbstractContextManager[None]:
        """Mark pure work (a parse) that a stop signal abandons at once."""
        return self._interruptible(0.0)

    @contextlib.contextmanager
    def _interruptible(self, late: float) -> Iterator[None]:
        self._interrupt_late = late
        try:
            if self._event.is_set():
                raise Interrupted
            yield
        finally:
            self._interrupt_late = None

    def time_to_remove_readings(self) -> float:
        """What remains of REMOVE_READINGS_BY_SECONDS since the first stop signal.

        Counted from the signal, not from now: grpc may have taken a while to
        notice it, and the whole shutdown stays within a second all the same.
        """
        if self.signalled_at is None:
            return REMOVE_READINGS_BY_SECONDS
        elapsed = time.monotonic() - self.signalled_at
        return max(0.0, REMOVE_READINGS_BY_SECONDS - elapsed)


class Deadline:
    """A Stop for the removal on exit: waits end, and pure work is cut, at a time.

    Pure work is cut by SIGALRM, whose handler raises Interrupted (main thread
    only; elsewhere the work runs to its end): a parse of a file changed
    since the last poll must not hold the exit past its second. Not a thread
    with a timeout: a parse cannot be stopped from another thread.
    """

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds

    def is_set(self) -> bool:
        return False  # nothing to abandon a lock wait for but the time, see time_left

    def wait(self, timeout: float) -> bool:
        time.sleep(max(0.0, min(timeout, self.time_left())))
        return False

    def time_left(self) -> float:
        return max(0.0, self._at - time.monotonic())

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        left = self.time_left()
        if left <= 0:
            raise Interrupted
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, left)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise Interrupted
