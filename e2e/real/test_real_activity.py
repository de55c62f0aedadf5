"""Utilization, power and temperature beside NVIDIA's nvml-mock, as `nvidia-smi` reads them.

`nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw,temperature.gpu`
in the node view: a claimed GPU is busy, drawing power and warm within what the
suite's own arithmetic gives for the profile (framework/expected.py), the others
read idle, and all return to idle when the pods go. Time-sliced, a GPU reads
busier than one claim makes it. A `nvml-mock-ctl util` pin holds through pods
coming and going.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from e2e.framework.realstack import RealStack
from e2e.framework.smiactivity import bounds, everywhere, own_index, wait_reads
from e2e.real.conftest import GpuPod


def test_1_a_claimed_gpu_is_busy_warm_and_drawing_and_returns_to_idle(
    real: RealStack, gpu_pod: GpuPod
) -> None:
    wait_reads(real, everywhere(real, Counter()), "an idle node")
    pod = gpu_pod()
    mine = own_index(real, pod)
    wait_reads(real, everywhere(real, Counter({mine: 1})), "its GPU busy, the others idle")
    real.delete_pods([pod])
    wait_reads(real, everywhere(real, Counter()), "idle again")


def test_2_a_util_pin_holds_through_pods_coming_and_going(real: RealStack, gpu_pod: GpuPod) -> None:
    real.ctl("util", "--gpu", "1", "33")
    try:
        for _ in range(2):
            pods = [gpu_pod() for _ in range(2)]
            claims = Counter(own_index(real, pod) for pod in pods)
            want = everywhere(real, claims)
            want[1] = {"gpu": (33, 33), "memory": (33, 33)}
            wait_reads(real, want, "the pin on GPU 1, the rest following the pods")
            real.delete_pods(pods)
    finally:
        real.ctl("reset", "--gpu", "1")
    wait_reads(real, everywhere(real, Counter()), "idle after the reset")


def test_3_time_sliced_a_gpu_reads_busier(time_sliced: RealStack, gpu_pod: GpuPod) -> None:
    real = time_sliced
    pods = [gpu_pod() for _ in range(len(real.expectation.uuids) + 1)]
    claims = Counter(own_index(real, pod) for pod in pods)
    assert max(claims.values()) == 2, claims
    shared = claims.most_common(1)[0][0]
    want: dict[int, Any] = everywhere(real, claims)
    assert want[shared]["gpu"][0] > bounds(real, shared, 1)["gpu"][1]  # busier than any one
    wait_reads(real, want, "the shared GPU busier than the others")
    real.delete_pods(pods)
    wait_reads(real, everywhere(real, Counter()), "every GPU idle")
