"""The allocwatch CLI as a process for a benchmark: start it, never leave it behind, and
what it should publish."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

from allocwatch.profile import Device
from devtools.podresources import FakePodResourcesLister

REPO = Path(__file__).resolve().parents[1]


def start_watcher(
    kubelet: FakePodResourcesLister,
    driver_root: Path,
    interval: str,
    repo: Path = REPO,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], int]:
    """Start `repo`'s CLI (with `extra` flags and `env`); return it and its metrics port."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "allocwatch",
            "--socket",
            kubelet.socket_path,
            "--driver-root",
            str(driver_root),
            "--interval",
            interval,
            "--metrics-address",
            "127.0.0.1:0",
            *(extra or []),
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo,
        env=env,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"on port (\d+)", line)
        if m:
            # Keep draining the change log, or a full pipe would block the watcher.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, int(m.group(1))
    raise RuntimeError("the watcher exited before serving metrics")


def kill_if_running(proc: subprocess.Popen[str] | None) -> None:
    """A benchmark that fails must not leave its watcher behind."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def expected_used(device: Device, claims: int, fraction: float = 0.5) -> int:
    """used_bytes by upstream's arithmetic, written out here, not taken from the code measured."""
    aperture = max(device.total_bytes - device.reserved_bytes, 0)
    return min(int(float(aperture) * fraction) * claims, aperture)
