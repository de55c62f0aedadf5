"""Shutdown: the stop signals and event, when a signal may interrupt, the removal's time.

Light on purpose: `allocwatch` installs its first handlers from here before
anything heavy is imported, so a stop signal is a clean exit 0 from the start.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

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


class Shutdown:
    """The stop event, set by a stop signal (or `set`), and the in-call interrupt rule.

    The handler raises Interrupted only while a blocking call runs (`call()`),
    never elsewhere: a write must not be cut in half. A call begun after the
    event is set is not made.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._in_call = False
        self.signalled_at: float | None = None  # time.monotonic() of the first signal

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.handle_signal)

    def handle_signal(self, _signum: int, _frame: FrameType | None) -> None:
        if self.signalled_at is None:
            # During a call this runs only when grpc next checks for signals.
            late = GRPC_SIGNAL_CHECK_SECONDS if self._in_call else 0.0
            self.signalled_at = time.monotonic() - late
        self._event.set()
        if self._in_call:
            raise Interrupted

    @property
    def in_call(self) -> bool:
        return self._in_call

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Mark a blocking call, for exactly its length; Interrupted if already stopping.

        Not a moment longer: an Interrupted raised while the failure of a
        call is handled (the channel closed, say) would escape the
        `except Interrupted` beside the call.
        """
        self._in_call = True
        try:
            if self._event.is_set():
                raise Interrupted
            yield
        finally:
            self._in_call = False

    def time_to_remove_readings(self) -> float:
        """What remains of REMOVE_READINGS_BY_SECONDS since the first stop signal.

        Counted from the signal, not from now: grpc may have taken a while to
        notice it, and the whole shutdown stays within a second all the same.
        """
        if self.signalled_at is None:
            return REMOVE_READINGS_BY_SECONDS
        elapsed = time.monotonic() - self.signalled_at
        return max(0.0, REMOVE_READINGS_BY_SECONDS - elapsed)
