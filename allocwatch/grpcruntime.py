"""grpc's process-wide tuning: channel options, timer slack for its threads.

Everything here changes how grpc runs in this process, not what a call means.
A thread's timer slack is how late the kernel may end the thread's timed waits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator

import grpc

# Authority "localhost", as the kubelet dials plugins: Python grpc would send
# the %-encoded socket path, which strict HTTP/2 servers reject. The size limit
# is other pod-resources clients'. A short reconnect backoff, so the poll after
# a kubelet restart finds the new socket; not `min_reconnect_backoff_ms`, which
# is the connect timeout. No BDP probing: a local socket has nothing to tune,
# and its pings keep grpc's threads waking after each response.
CHANNEL_OPTIONS = (
    ("grpc.default_authority", "localhost"),
    ("grpc.max_receive_message_length", 16 << 20),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.http2.bdp_probe", 0),
)

# grpc's threads poll for work on short timeouts even on an idle node. Under
# this timer slack the kernel may end those waits this late, and together, so
# they wake far less often; work handed to them still wakes them at once. The
# price: grpc's own timers (a reconnect, say) may fire up to this late.
GRPC_TIMER_SLACK_NS = 1_000_000_000

_TASKS = "/proc/self/task"
# How long the first channel waits for the threads of its throwaway to exit.
THROWAWAY_EXIT_SECONDS = 1.0
_clock_measured = False


def _measure_the_clock_at_normal_slack(target: str) -> None:
    """Have grpc's one-time measurement of the CPU clock done before any slack.

    abseil times the CPU clock over short sleeps on a grpc thread, once per
    process, and every call waits for it; under the slack those sleeps could
    delay a stop signal (`make bench-shutdown`). A throwaway channel at the
    caller's slack takes the measurement; once closed, its threads exit and
    the next channel starts new ones under the slack. Threads not gone in time
    are reused without it, which costs CPU, not correctness.
    """
    global _clock_measured
    if _clock_measured or not os.path.isdir(_TASKS):
        return
    _clock_measured = True
    before = len(os.listdir(_TASKS))
    grpc.insecure_channel(target, options=CHANNEL_OPTIONS).close()
    deadline = time.monotonic() + THROWAWAY_EXIT_SECONDS
    while len(os.listdir(_TASKS)) > before and time.monotonic() < deadline:
        time.sleep(0.002)


def open_channel(socket_path: str) -> grpc.Channel:
    """A channel to a unix socket with our options; the first starts grpc's threads."""
    # grpc reads `unix://relative/path` as an authority, not a path, and the
    # path as a URI's: `?`, `#` and `%` must be escaped.
    target = "unix://" + urllib.parse.quote(os.path.abspath(socket_path), safe="/")
    _measure_the_clock_at_normal_slack(target)
    with timer_slack(GRPC_TIMER_SLACK_NS):
        return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


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
