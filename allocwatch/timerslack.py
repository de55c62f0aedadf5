"""A thread's timer slack: how late the kernel may end the thread's timed waits."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Callable, Iterator

# linux/prctl.h
PR_SET_TIMERSLACK = 29
PR_GET_TIMERSLACK = 30


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


@contextlib.contextmanager
def timer_slack(nanoseconds: int) -> Iterator[None]:
    """Run the block with this thread's timer slack at `nanoseconds`.

    Threads started inside the block keep that slack for their lives, which
    is the point: a library's threads can be given a slack without touching
    the library. The kernel may then end any timed wait of theirs up to that
    much late, and ends several together; a wait woken by an event (a futex
    wake, a readable socket) ends at once, whatever the slack. The caller's
    own slack is restored on leaving. Where prctl is missing or refuses
    (not Linux, a seccomp filter), the block runs unchanged.
    """
    changed = (
        _prctl is not None
        and (previous := _prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) > 0
        and _prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(nanoseconds), 0, 0, 0) == 0
    )
    try:
        yield
    finally:
        if changed:
            _prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(previous), 0, 0, 0)
