"""The demo's picture: what nvidia-smi reads of every GPU, second by second, as pods come
and go, drawn as one image (matplotlib).

`Sampler` reads `nvidia-smi --query-gpu=...` in the node view once a second in a
thread of its own and notes the events the demo marks; `draw` renders memory,
utilization, power and temperature per GPU against time, with the events as
vertical lines.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from devtools.waiting import wait_until
from e2e.framework.realstack import NODE_VIEW, RealStack

FIELDS = [
    "index",
    "memory.used",
    "utilization.gpu",
    "utilization.memory",
    "power.draw",
    "temperature.gpu",
]
# (title, unit, the sample's key) of each panel, top to bottom
PANELS = [
    ("memory used", "MiB", "memory"),
    ("GPU utilization", "%", "gpu"),
    ("memory utilization", "%", "memory_util"),
    ("power draw", "W", "power"),
    ("temperature", "°C", "temperature"),
]


@dataclass
class Timeline:
    # seconds since the start -> GPU index -> the panel key -> value
    samples: list[tuple[float, dict[int, dict[str, float]]]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)


def read(real: RealStack, namespace: str) -> dict[int, dict[str, float]]:
    out = {}
    for index, memory, gpu, memory_util, power, temperature in real.smi.query(
        namespace, NODE_VIEW, FIELDS
    ):
        out[int(index)] = {
            "memory": float(memory),
            "gpu": float(gpu),
            "memory_util": float(memory_util),
            "power": float(power),
            "temperature": float(temperature),
        }
    return out


class Sampler:
    """Samples in a thread until stopped; `mark` notes an event at the time it happens."""

    def __init__(self, real: RealStack, namespace: str, period: float = 1.0) -> None:
        self.real, self.namespace, self.period = real, namespace, period
        self.timeline = Timeline()
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: Exception | None = None  # the last read's, if it failed

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_samples(self, count: int, slack: float = 60.0) -> None:
        """Return once `count` more samples are taken (the picture's time between events)."""
        want = len(self.timeline.samples) + count
        wait_until(
            lambda: len(self.timeline.samples) >= want,
            count * self.period + slack,
            f"{count} nvidia-smi samples",
            diagnostics=lambda: f"the last failed read: {self.error!r}",
        )

    def mark(self, what: str) -> None:
        self.timeline.events.append((time.monotonic() - self._start, what))

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                sample = read(self.real, self.namespace)
            except Exception as exc:  # a failed exec leaves a gap; wait_samples names it
                self.error = exc
            else:
                self.timeline.samples.append((began - self._start, sample))
            self._stop.wait(max(0.0, self.period - (time.monotonic() - began)))


def draw(timeline: Timeline, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = sorted({i for _, sample in timeline.samples for i in sample})
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(10, 11), sharex=True)
    times = [t for t, _ in timeline.samples]
    for ax, (name, unit, key) in zip(axes, PANELS, strict=True):
        for gpu in gpus:
            values = [sample.get(gpu, {}).get(key, float("nan")) for _, sample in timeline.samples]
            ax.plot(times, values, label=f"GPU {gpu}", linewidth=1.6)
        ax.set_ylabel(f"{name} ({unit})")
        ax.grid(alpha=0.3)
        for when, _ in timeline.events:
            ax.axvline(when, color="grey", linestyle=":", linewidth=1)
    top = axes[0]
    for when, what in timeline.events:
        top.annotate(what, (when, 1.0), xycoords=("data", "axes fraction"), rotation=30,
                     fontsize=8, va="bottom", ha="left")  # fmt: skip
    axes[0].legend(loc="upper left", ncols=len(gpus), fontsize=8)
    axes[-1].set_xlabel("seconds")
    fig.suptitle(title, y=0.995)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
