"""Elapsed time less the waits for a CPU: what a time bound in a test measures.

A bound such as "exits within a second of SIGTERM" is a promise about what the
watcher waits for and what it does. On a busy machine its threads also wait,
runnable, for a CPU that the kernel gives to other processes, for as long as
the machine's load says, and no program can promise anything about that. The
kernel counts that wait per thread (the second field of
/proc/<pid>/task/<tid>/schedstat); these clocks take it out of the wall time,
for the threads on the path being timed. On a quiet machine the wait is near
zero and the bound holds the plain wall time.

Only the waits of threads still readable at the end are taken out (a process's
main thread, ours): a wait on another thread stays in the time, so a bound
can only be stricter than the process's own share, never looser.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path


def queued_seconds(schedstat: str | Path = "/proc/thread-self/schedstat") -> float:
    """How long the thread has been runnable but waiting for a CPU, in all."""
    return int(Path(schedstat).read_text().split()[1]) / 1e9


class OwnClock:
    """Seconds since it was made, less the time this thread waited for a CPU."""

    def __init__(self) -> None:
        self._queued = queued_seconds()
        self._started = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self._started - (queued_seconds() - self._queued)


def time_to_exit(
    proc: subprocess.Popen[str], sig: signal.Signals = signal.SIGTERM, timeout: float = 10.0
) -> float:
    """Send `sig`; the seconds until `proc` exited, less the waits for a CPU.

    The waits taken out are those of its main thread, which takes the signal
    and runs the shutdown, and of this thread, which wakes when the process
    has gone. `proc` is left for the caller to reap (`proc.wait()`); its main
    thread's count is read before that, while it is a zombie. AssertionError
    if it is still running after `timeout` seconds.
    """
    pidfd = os.pidfd_open(proc.pid)
    try:
        main = f"/proc/{proc.pid}/schedstat"
        theirs, ours = queued_seconds(main), queued_seconds()
        started = time.monotonic()
        proc.send_signal(sig)
        exited, _, _ = select.select([pidfd], [], [], timeout)
        took = time.monotonic() - started
        assert exited, f"still running {timeout:g}s after {sig.name}"
        queued = queued_seconds(main) - theirs + queued_seconds() - ours
    finally:
        os.close(pidfd)
    return took - queued
