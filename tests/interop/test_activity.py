"""Utilization, power and temperature follow the claims, as the real mock library reads
them, and a pin made with the real nvml-mock-ctl always shows.

Read through NVML (nvmlDeviceGetUtilizationRates, GetPowerUsage,
GetTemperature, GetProcessUtilization) over many samples: the engine's
simulator varies a busy GPU's readings within what allocwatch wrote. The
expected bands are the suite's own arithmetic on the a100 test profile:
idle 72 W / 33 °C, limit 400 W, target 83 °C, slowdown 87 °C.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.upstream import Ctl, Upstream
from devtools.waiting import wait_until
from tests.conftest import A100_UUIDS
from tests.interop.probe import Probe
from tests.interop.watching import watching

pytestmark = pytest.mark.timing

SAMPLES = 25
IDLE = {"gpu": 0, "memory": 0, "power_mw": 72_000, "temperature_c": 33}


def busy_bounds(lo: int, hi: int) -> dict[str, tuple[float, float]]:
    """What one GPU of band lo-hi % may read: power and temperature rise in proportion."""
    return {
        "gpu": (lo, hi),
        "memory": (int(lo * 3 / 7), -(-hi * 2 // 3)),
        "power_mw": (72_000 + lo / 100 * 328_000 - 1, 72_000 + hi / 100 * 328_000 + 1),
        "temperature_c": (33 + lo / 100 * 50 - 1, 33 + hi / 100 * 50 + 1),
    }


ONE_CLAIM = busy_bounds(70, 90)
TWO_CLAIMS = busy_bounds(91, 99)


def fits(reading: dict[str, Any], want: dict[str, Any]) -> bool:
    for key, bound in want.items():
        lo, hi = bound if isinstance(bound, tuple) else (bound, bound)
        if not lo <= reading[key] <= hi:
            return False
    return True


def samples(probe: Probe, want: dict[int, dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """SAMPLES reads of every device, once all fit `want` (index -> bounds); all must fit."""
    wait_until(
        lambda: all(fits(probe.read_activity()[i], w) for i, w in want.items()),
        15,
        f"NVML to read {want}",
    )
    reads = [probe.read_activity() for _ in range(SAMPLES)]
    for read in reads:
        for index, bounds in want.items():
            assert fits(read[index], bounds), (index, read[index], bounds)
    return reads


def test_activity_follows_the_claims_as_nvml_reads_it(
    probe: Probe, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    idle_all = dict.fromkeys(range(8), IDLE)
    with watching(kubelet, config_dir) as w:
        samples(probe, idle_all)  # 0 %, the idle draw and temperature, not the clock's 10-45 %
        kubelet.set_pods([gpu_pod("ml", "train", [A100_UUIDS[2]])])
        reads = samples(probe, {**idle_all, 2: ONE_CLAIM})
        assert len({read[2]["gpu"] for read in reads}) > 1  # it varies, as a real GPU does
        assert len({read[2]["power_mw"] for read in reads}) > 1
        (process,) = reads[-1][2]["processes"]  # nvidia-smi pmon's view
        assert (process["sm"], process["mem"]) == (80, 45)
        kubelet.set_pods(
            [
                gpu_pod("ml", "a", [A100_UUIDS[2] + "::0"]),
                gpu_pod("ml", "b", [A100_UUIDS[2] + "::1"]),
            ]
        )
        samples(probe, {**idle_all, 2: TWO_CLAIMS})  # time-sliced: busier
        kubelet.set_pods([])
        samples(probe, idle_all)
        assert w.stop() == 0


def test_a_pin_always_shows_and_activity_returns_after_reset(
    upstream: Upstream, probe: Probe, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    ctl = Ctl(upstream, config_dir / "overrides.yaml", config_dir / "config.yaml")
    churn = [
        [gpu_pod("ml", "a", [A100_UUIDS[1]]), gpu_pod("ml", "b", [A100_UUIDS[2]])],
        [gpu_pod("ml", "b", [A100_UUIDS[2]]), gpu_pod("ml", "c", [A100_UUIDS[3]])],
        [gpu_pod("ml", "a", [A100_UUIDS[1]]), gpu_pod("ml", "c", [A100_UUIDS[3]])],
        [gpu_pod("ml", "a", [A100_UUIDS[1]]), gpu_pod("ml", "b", [A100_UUIDS[2]])],
    ]
    with watching(kubelet, config_dir) as w:
        kubelet.set_pods(churn[0])
        samples(probe, {1: ONE_CLAIM, 2: ONE_CLAIM, 0: IDLE})
        ctl.ok("util", "--gpu", "2", "33")  # one device
        ctl.ok("temp", "--gpu", "all", "50")  # every device, over ours
        ctl.ok("power", "--gpu", "1", "250")
        pinned = {"gpu": 33, "memory": 33}
        for pods in churn:
            kubelet.set_pods(pods)
            claimed = {int(A100_UUIDS.index(p["containers"][0]["devices"][0]["device_ids"][0]))
                       for p in pods}  # fmt: skip
            want: dict[int, dict[str, Any]] = {
                i: {"temperature_c": 50, **({"gpu": (70, 90)} if i in claimed else {"gpu": 0})}
                for i in range(8)
            }
            want[2] = {**want[2], **pinned}
            want[1] = {**want[1], "power_mw": 250_000}
            samples(probe, want)
        ctl.ok("reset", "--gpu", "all")
        samples(probe, {1: ONE_CLAIM, 2: ONE_CLAIM, 0: IDLE, 5: IDLE})
        ctl.ok("temp", "--gpu", "1", "61")
        samples(probe, {1: {**ONE_CLAIM, "temperature_c": 61}, 2: ONE_CLAIM})
        assert w.stop() == 0
    # Removal takes only what was ours: the pin stays, the others return to the
    # profile's own clock (10-45 %), once the library has re-read the file.
    clock = {"gpu": (10, 45), "power_mw": 72_000, "temperature_c": 33}
    samples(probe, {1: {"temperature_c": 61}, 0: clock, 2: clock, 5: clock})
