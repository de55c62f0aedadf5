"""Issue 6, test 2: what our watcher publishes is what NVML callers read.

The real mock libnvidia-ml.so is loaded through pynvml in a separate, long-lived
process (so its environment is clean and its override store lives across
reads, as in any NVML consumer), with MOCK_NVML_OVERRIDES_TTL=100ms. Our
watcher runs as the CLI against a fake kubelet.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from devtools.documents import load, memory
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.upstream import REPO
from tests.conftest import A100_APERTURE, A100_HALF, A100_UUIDS
from tests.interop.probe import TTL_S, Probe, nvml_memory
from tests.support import START_SECONDS

pytestmark = pytest.mark.timing

TOTAL = 42949672960
RESERVED = 611319808
# The mock's cache compares wall-clock times, ours monotonic ones; they part
# by no more than this over a TTL, even while NTP slews the clock.
CLOCK_SLACK_S = 0.01
INTERVAL = "100ms"


def expect_unchanged_capacity(devices: list[dict[str, Any]]) -> None:
    for i, dev in enumerate(devices):
        assert dev["uuid"] == A100_UUIDS[i]
        assert dev["v1"]["total"] == TOTAL, (i, dev)
        assert dev["v2"]["total"] == TOTAL, (i, dev)
        assert dev["v2"]["reserved"] == RESERVED, (i, dev)


def wait_nvml(
    probe: Probe, want: dict[int, tuple[int, int]], timeout: float, changed: float | None = None
) -> None:
    """Poll NVML until every device reads `want`.

    With `changed`, a time.monotonic() by which the file already held `want`:
    a read asked for once the mock's TTL has passed since then must read it.
    Timed from the asking, not from the answer, which on a busy machine comes
    as late as the probe process gets a CPU.
    """
    deadline = time.monotonic() + timeout
    while True:
        asked = time.monotonic()
        devices = probe.read()
        got = {i: nvml_memory(d) for i, d in enumerate(devices)}
        if got == want:
            expect_unchanged_capacity(devices)
            return
        if changed is not None:
            late = asked - changed
            assert late < TTL_S + CLOCK_SLACK_S, (
                f"NVML still reads {got} in a read asked for {late:.3f}s after the file changed"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"NVML still reads {got}, want {want}")
        time.sleep(0.005)


def wait_file(path: Path, want: dict[int, tuple[int, int]], timeout: float) -> None:
    block = {str(i): {"used_bytes": u, "free_bytes": f} for i, (u, f) in want.items()}
    deadline = time.monotonic() + timeout
    while memory(load(path)) != block:
        assert time.monotonic() < deadline, f"file still shows {memory(load(path))}"
        time.sleep(0.005)


def test_nvml_reads_our_published_memory(
    probe: Probe, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    overrides = config_dir / "overrides.yaml"
    idle = {i: (0, A100_APERTURE) for i in range(8)}
    # Before anything is published NVML serves the profile baseline.
    wait_nvml(probe, idle, timeout=5)

    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "allocwatch",
            "--socket",
            kubelet.socket_path,
            "--config",
            str(config_dir / "config.yaml"),
            "--overrides",
            str(overrides),
            "--interval",
            INTERVAL,
            "--metrics-address",
            "",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_file(overrides, idle, timeout=START_SECONDS)  # the watcher's start
        wait_nvml(probe, idle, timeout=5)

        # A plain claim on GPU 3, and two time-slicing replicas of GPU 5.
        kubelet.set_pods(
            [
                gpu_pod("ml", "trainer", [A100_UUIDS[3]]),
                gpu_pod("ml", "slice-a", [A100_UUIDS[5] + "::0"]),
                gpu_pod("ml", "slice-b", [A100_UUIDS[5] + "::1"]),
            ]
        )
        busy = dict(idle)
        busy[3] = (A100_HALF, A100_APERTURE - A100_HALF)
        busy[5] = (A100_APERTURE, 0)
        wait_file(overrides, busy, timeout=10)
        # Seen by NVML within one TTL of the file.
        wait_nvml(probe, busy, timeout=10, changed=time.monotonic())

        kubelet.set_pods([])
        wait_file(overrides, idle, timeout=10)
        wait_nvml(probe, idle, timeout=10, changed=time.monotonic())
    finally:
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=10)
    assert watcher.returncode == 0, err
    # SIGTERM retracted our keys; NVML falls back to the profile, which is idle too.
    assert memory(load(overrides)) == {}
    wait_nvml(probe, idle, timeout=5)
