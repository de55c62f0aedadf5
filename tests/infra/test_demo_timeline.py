"""make demo's timeline: sampled in a thread through a gap, drawn as a PNG."""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path
from typing import Any

import pytest

from devtools.waiting import WaitTimeout
from hack.demo_timeline import Sampler, draw


class StubSmi:
    """nvidia-smi's query rows for two GPUs; GPU 1 rises with each read; a read may fail."""

    def __init__(self, failing: Container[int] = ()) -> None:
        self.reads = 0
        self.failing = failing

    def query(self, namespace: str, pod: str, fields: list[str]) -> list[list[str]]:
        self.reads += 1
        if self.reads in self.failing:
            raise RuntimeError(f"exec failed (read {self.reads})")
        n = str(self.reads)
        return [["0", "0", "0", "0", "12.5", "30"], ["1", n, n, n, "40.0", "50"]]


class StubStack:
    def __init__(self, smi: StubSmi) -> None:
        self.smi = smi


def test_samples_go_on_past_a_failed_read_and_draw_a_png(tmp_path: Path) -> None:
    real: Any = StubStack(StubSmi(failing={2}))
    with Sampler(real, "demo", period=0.01) as sampler:
        sampler.wait_samples(3)
        sampler.mark("a pod starts")
        sampler.wait_samples(3)
    samples = sampler.timeline.samples
    assert len(samples) >= 6
    assert isinstance(sampler.error, RuntimeError)  # the gap, not the end of sampling
    assert samples[0][1][1]["memory"] == 1.0 and samples[1][1][1]["memory"] == 3.0
    assert [what for _, what in sampler.timeline.events] == ["a pod starts"]
    picture = tmp_path / "timeline.png"
    draw(sampler.timeline, picture, "stub")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_waiting_for_samples_that_never_come_names_the_failed_read() -> None:
    real: Any = StubStack(StubSmi(failing=range(1, 10**9)))
    with (
        Sampler(real, "demo", period=0.01) as sampler,
        pytest.raises(WaitTimeout, match="exec failed"),
    ):
        sampler.wait_samples(1, slack=0.1)
