"""Issue 6, test 1: our publisher and nvml-mock-ctl share one file and one lock.

Our thread publishes 200 readings while another thread runs a scripted series
of `nvml-mock-ctl temp/set/fail/pstate` processes against the same file. Each
side checks, right after its own write and again just before its next one,
that its write is still there: a writer that ignored the other's flock would
write back a stale document and one of those checks would see it. The
expected state after each nvml-mock-ctl step comes from nvml-mock-ctl itself,
replaying the same steps on a private shadow file.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from allocwatch.profile import load_devices
from allocwatch.publisher import OverridesPublisher
from allocwatch.reconcile import MemoryReading
from upstreamtools import Ctl, Upstream, load, memory, same, without_memory

PUBLISHES = 200
STEPS = 100


def ctl_steps(n: int) -> list[list[str]]:
    """A deterministic mix of mutations, each changing something on some device."""
    steps: list[list[str]] = []
    for j in range(n):
        gpu = str(j % 8)
        kind = (j // 8) % 4
        if kind == 0:
            steps.append(["temp", "--gpu", gpu, str(40 + j % 50)])
        elif kind == 1:
            steps.append(["set", "--gpu", gpu, f"thermal.temperature_gpu_c={50 + j % 40}"])
        elif kind == 2:
            mode = "lost" if (j // 32) % 2 == 0 else "healthy"
            steps.append(["fail", "--gpu", gpu, "--mode", mode])
        else:
            steps.append(["pstate", "--gpu", gpu, str(j % 16)])
    return steps


def readings(i: int, aperture: int) -> dict[int, MemoryReading]:
    """Publish i: distinct values on every device."""
    out = {}
    for dev in range(8):
        used = (i * 8 + dev + 1) * 4096
        out[dev] = MemoryReading(used_bytes=used, free_bytes=aperture - used)
    return out


def as_block(r: dict[int, MemoryReading]) -> dict[str, dict[str, Any]]:
    return {str(k): {"used_bytes": v.used_bytes, "free_bytes": v.free_bytes} for k, v in r.items()}


def test_interleaved_writers_lose_nothing(upstream: Upstream, config_dir: Path) -> None:
    config = config_dir / "config.yaml"
    target = config_dir / "overrides.yaml"
    devices = load_devices(config)
    aperture = devices[0].total_bytes - devices[0].reserved_bytes

    # Ground truth for every nvml-mock-ctl step, from nvml-mock-ctl alone.
    steps = ctl_steps(STEPS)
    shadow = Ctl(upstream, config_dir / "shadow.yaml", config)
    expected_ctl: list[dict[str, Any]] = []
    for step in steps:
        shadow.ok(*step)
        expected_ctl.append(load(shadow.overrides))
        assert not memory(expected_ctl[-1])

    ctl = Ctl(upstream, target, config)
    publisher = OverridesPublisher(target, lock_timeout=30.0)
    errors: list[str] = []
    ours_times: list[float] = []
    ctl_window: list[float] = []
    started = threading.Barrier(2)

    def ours() -> None:
        started.wait()
        last: dict[str, dict[str, Any]] | None = None
        for i in range(PUBLISHES):
            if last is not None:
                seen = memory(load(target))
                if not same(seen, last):
                    errors.append(f"our publish {i - 1} was lost before publish {i}: {seen}")
                    return
            mine = readings(i, aperture)
            publisher.publish(mine)
            ours_times.append(time.monotonic())
            last = as_block(mine)
            seen = memory(load(target))
            if not same(seen, last):
                errors.append(f"our publish {i} is not in the file right after it: {seen}")
                return
            status = ctl.run("status")
            if status.returncode != 0:
                errors.append(
                    f"status after our publish {i}: exit {status.returncode}: "
                    f"{status.stderr.strip()}"
                )
                return

    def theirs() -> None:
        started.wait()
        ctl_window.append(time.monotonic())
        for j, step in enumerate(steps):
            if j:
                seen = without_memory(load(target))
                if not same(seen, expected_ctl[j - 1]):
                    errors.append(f"nvml-mock-ctl step {j - 1} {steps[j - 1]} was lost: {seen}")
                    return
            proc = ctl.run(*step)
            if proc.returncode != 0:
                # exit 2 here would mean it refused what we wrote into the file
                errors.append(
                    f"nvml-mock-ctl {' '.join(step)} exited {proc.returncode}: "
                    f"{proc.stderr.strip()}"
                )
                return
            seen = without_memory(load(target))
            if not same(seen, expected_ctl[j]):
                errors.append(
                    f"nvml-mock-ctl step {j} {step}: file shows {seen}, expected {expected_ctl[j]}"
                )
                return
            status = ctl.run("status")
            if status.returncode != 0:
                errors.append(
                    f"status after step {j}: exit {status.returncode}: {status.stderr.strip()}"
                )
                return
        ctl_window.append(time.monotonic())

    threads = [threading.Thread(target=ours), threading.Thread(target=theirs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert not errors, errors[0]

    # The two sides really did overlap: most of our publishes landed while
    # nvml-mock-ctl was mid-series.
    assert len(ctl_window) == 2
    overlapped = sum(ctl_window[0] <= t <= ctl_window[1] for t in ours_times)
    assert overlapped >= PUBLISHES // 2, f"only {overlapped} publishes overlapped nvml-mock-ctl"

    final = load(target)
    assert same(memory(final), as_block(readings(PUBLISHES - 1, aperture)))
    assert same(without_memory(final), expected_ctl[-1])
    # status agrees with the file, our integers included
    assert same(ctl.status(), final)
    # nothing unlinked the lock, and a later mutation accepts what we wrote
    assert (config_dir / "overrides.yaml.lock").exists()
    ctl.ok("temp", "--gpu", "all", "77")
    assert same(memory(load(target)), as_block(readings(PUBLISHES - 1, aperture)))
