"""CPU time and peak memory of another process, from /proc and its CPU clock."""

from __future__ import annotations

import re
import time
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """CPU time of the whole process in ns precision, threads that have exited included.

    This is the kernel's CPU-time clock of another process (clockid
    `(~pid << 3) | CPUCLOCK_SCHED`, what clock_getcpuclockid returns).
    /proc/<pid>/stat counts in 10 ms ticks, and summing
    /proc/<pid>/task/*/schedstat misses every thread that exited meanwhile.
    """
    return time.clock_gettime(((~pid) << 3) | 2)


def thread_cpu_seconds(pid: int, tid: int) -> float:
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]) / 1e9


def peak_rss_mib(pid: int) -> float:
    m = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert m, "no VmHWM"
    return int(m.group(1)) / 1024
