"""Elapsed time less the waits for a CPU: what a time bound in a test measures.

A bound such as "exits within a second of SIGTERM" is a promise about what the
watcher waits for and what it does. On a busy machine its threads also wait,
runnable, for a CPU that the kernel gives to other processes, for as long as
the machine's load says, and no program can promise anything about that. The
kernel counts that wait per thread (the second field of
/proc/<pid>/task/<tid>/schedstat); these clocks take it out of the wall time,
for the threads on the path being timed. On a quiet machine the wait is near
zero and the bound holds the plain wall time.

Only the waits of the threads on the timed path are taken out (a process's
main thread, read before it is reaped; ours; a thread that marks its end):
other threads' waits stay in the time. The timed threads mostly wait on one
another, so their waits seldom overlap, and a bound timed so is, if anything,
stricter than the process's own share.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path


def queued_seconds(schedstat: str | Path = "/proc/thread-self/schedstat") -> float:
    """How long the thread has been runnable but waiting for a CPU, in all."""
    return int(Path(schedstat).read_text().split()[1]) / 1e9


def _schedstat(tid: int) -> str:
    return f"/proc/self/task/{tid}/schedstat"


class OwnClock:
    """Seconds since it was made, less the time the timed threads waited for a CPU.

    The timed threads are the one that makes the clock and `others` (threads of
    this process, running). One of those that ends before `seconds()` is read
    calls `mark()` as its part of the work ends, while its count can be read.
    """

    def __init__(self, *others: threading.Thread) -> None:
        self._queued: dict[int, float] = {}
        for tid in [threading.get_native_id(), *(t.native_id for t in others if t.native_id)]:
            with contextlib.suppress(FileNotFoundError):  # ended already: nothing to take out
                self._queued[tid] = queued_seconds(_schedstat(tid))
        self._marked: dict[int, float] = {}
        self._started = time.monotonic()

    def mark(self) -> None:
        """From a timed thread: its part is done; its wait for a CPU counts up to here."""
        self._marked[threading.get_native_id()] = queued_seconds()

    def seconds(self) -> float:
        took = time.monotonic() - self._started
        for tid, before in self._queued.items():
            after = self._marked.get(tid)
            if after is None:
                try:
                    after = queued_seconds(_schedstat(tid))
                except FileNotFoundError:  # ended unmarked: its wait stays in
                    continue
            took -= after - before
        return took


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


def run_timed(
    argv: list[str], timeout: float = 60.0, **popen: object
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run `argv` to its exit: what it did, and how long it ran less the waits for a CPU.

    Timed over its whole life, its start included, less its main thread's
    wait and this thread's. Its output must fit in the pipes (64 KiB each):
    it is read once the process has exited. AssertionError (the process
    killed) if it is still running after `timeout` seconds.
    """
    ours = queued_seconds()
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,  # type: ignore[call-overload]
    )
    try:
        pidfd = os.pidfd_open(proc.pid)
        try:
            exited, _, _ = select.select([pidfd], [], [], timeout)
            took = time.monotonic() - started
            assert exited, f"{argv} still running after {timeout:g}s"
            queued = queued_seconds(f"/proc/{proc.pid}/schedstat") + queued_seconds() - ours
        finally:
            os.close(pidfd)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), took - queued
