"""Issue 6, test 1: our publisher and nvml-mock-ctl share one file and one lock.

Our thread publishes readings while another thread runs a scripted series of
`nvml-mock-ctl temp/set/fail/pstate` processes against the same file. Each
side checks, right after its own write and again just before its next one,
that its write is still there: a writer that ignored the other's flock would
write back a stale document and one of those checks would see it. The
expected state after each nvml-mock-ctl step comes from nvml-mock-ctl itself,
replaying the same steps on a private shadow file.

The overlap is arranged, not hoped for: we publish until nvml-mock-ctl has
run its last step, and each step waits for a publish made since the step
before. Counting publishes inside nvml-mock-ctl's time window instead made
the test pass or fail with the two writers' relative speed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from allocwatch.profilesource import load_devices
from allocwatch.publisher import OverridesPublisher
from allocwatch.reconcile import MemoryReading
from devtools.documents import load, memory, same, without_memory
from devtools.upstream import Ctl, Upstream
from tests.support.documents import wanted

pytestmark = pytest.mark.timing

PUBLISHES = 200  # at least; more while nvml-mock-ctl still runs
STEPS = 100
# A bound on one wait for the other writer, far above what one step takes.
WAIT_SECONDS = 60.0
# No progress by either writer for this long is a hang: longer than one step
# of either can take without failing on its own (a lock wait and a command's
# timeout, 30 s each).
STALL_SECONDS = 2 * WAIT_SECONDS


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
    published = threading.Condition()
    count = {"ours": 0}  # publishes made so far, under `published`
    ctl_done = threading.Event()
    ours_done = threading.Event()
    interleaved: list[int] = []  # ctl steps that followed a fresh publish of ours
    started = threading.Barrier(2)

    def ours() -> None:
        try:
            started.wait()
            last: dict[str, dict[str, Any]] | None = None
            i = 0
            while i < PUBLISHES or not ctl_done.is_set():
                if last is not None:
                    seen = memory(load(target))
                    if not same(seen, last):
                        errors.append(f"our publish {i - 1} was lost before publish {i}: {seen}")
                        return
                mine = readings(i, aperture)
                publisher.publish(wanted(mine))
                last = as_block(mine)
                with published:
                    count["ours"] = i + 1
                    published.notify_all()
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
                i += 1
            final_count["ours"] = i
        finally:
            ours_done.set()
            with published:
                published.notify_all()

    def publish_since(before: int) -> bool:
        """Wait until we have published after `before` publishes; False if we stopped."""
        with published:
            published.wait_for(
                lambda: count["ours"] > before or ours_done.is_set(), timeout=WAIT_SECONDS
            )
            return count["ours"] > before

    def theirs() -> None:
        try:
            started.wait()
            before = 0
            for j, step in enumerate(steps):
                if not publish_since(before):
                    errors.append(f"no publish of ours came before nvml-mock-ctl step {j}")
                    return
                with published:
                    before = count["ours"]
                interleaved.append(j)
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
                        f"nvml-mock-ctl step {j} {step}: file shows {seen}, "
                        f"expected {expected_ctl[j]}"
                    )
                    return
                status = ctl.run("status")
                if status.returncode != 0:
                    errors.append(
                        f"status after step {j}: exit {status.returncode}: {status.stderr.strip()}"
                    )
                    return
        finally:
            ctl_done.set()

    final_count: dict[str, int] = {}

    def progress() -> tuple[int, int]:
        with published:
            return count["ours"], len(interleaved)

    threads = [threading.Thread(target=ours), threading.Thread(target=theirs)]
    for t in threads:
        t.start()
    # Hung is no publish and no nvml-mock-ctl step for STALL_SECONDS. Not a
    # bound on the whole run: that is 300-odd process starts, as long as the
    # machine's load makes them.
    seen = progress()
    for t in threads:
        while t.is_alive():
            t.join(timeout=STALL_SECONDS)
            now = progress()
            assert not t.is_alive() or now != seen, f"a writer hung after {now}"
            seen = now
    assert not errors, errors[0]
    # Every nvml-mock-ctl step came after a publish of ours that followed the step
    # before, and we kept publishing until its last step was done.
    assert interleaved == list(range(STEPS))
    assert final_count["ours"] >= PUBLISHES

    last = as_block(readings(final_count["ours"] - 1, aperture))
    final = load(target)
    assert same(memory(final), last)
    assert same(without_memory(final), expected_ctl[-1])
    # status agrees with the file, our integers included
    assert same(ctl.status(), final)
    # nothing unlinked the lock, and a later mutation accepts what we wrote
    assert (config_dir / "overrides.yaml.lock").exists()
    ctl.ok("temp", "--gpu", "all", "77")
    assert same(memory(load(target)), last)
