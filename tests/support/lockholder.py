"""A real competing holder of a lock: util-linux flock(1) in another process."""

from __future__ import annotations

import subprocess
from pathlib import Path


def hold_lock(lock: Path) -> subprocess.Popen[str]:
    """util-linux flock(1) holding `lock` until we close its stdin."""
    proc = subprocess.Popen(
        ["flock", str(lock), "-c", "echo locked; read _"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=5)
