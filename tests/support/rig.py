"""The watch loop wired to the real pod-resources client and a fake kubelet in another process."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from allocwatch.document import parse_document
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.podresources import PodResourcesClient
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher
from allocwatch.shutdown import Interrupted, Shutdown
from allocwatch.watch import Watcher
from devtools.podresources import FakePodResourcesLister
from tests.conftest import A100_APERTURE, A100_HALF

IDLE = {"used_bytes": 0, "free_bytes": A100_APERTURE}
HALF = {"used_bytes": A100_HALF, "free_bytes": A100_APERTURE - A100_HALF}
FULL = {"used_bytes": A100_APERTURE, "free_bytes": 0}


def memory(path: Path) -> dict[str, dict[str, int]]:
    doc = parse_document(path.read_text())
    return {k: v["memory"] for k, v in doc.get("devices", {}).items() if "memory" in v}


def expected(busy: dict[int, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {str(i): busy.get(i, IDLE) for i in range(8)}


class Rig:
    def __init__(
        self, kubelet: FakePodResourcesLister, driver_root: Path, interval: float = 0.02
    ) -> None:
        self.kubelet = kubelet
        self.profile = driver_root / "config" / "config.yaml"
        self.overrides = driver_root / "config" / "overrides.yaml"
        self.client = PodResourcesClient(kubelet.socket_path, call_timeout=0.5)
        self.metrics = Metrics()
        self.watcher = Watcher(
            self.client,
            ProfileSource(self.profile),
            OverridesPublisher(self.overrides, lock_timeout=1),
            fraction=0.5,
            interval=interval,
            metrics=self.metrics,
        )
        self.stop = Shutdown()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        assert self.client.wait_ready(5)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # As the CLI runs it: a stop that lands in a List or a parse ends the
        # loop with Interrupted, which is how it stops, not a failure.
        with contextlib.suppress(Interrupted):
            self.watcher.run(self.stop)

    def close(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join(5)
            assert not self.thread.is_alive()
        self.client.close()

    def shows(self, busy: dict[int, dict[str, int]]) -> Callable[[], bool]:
        def check() -> bool:
            return self.overrides.exists() and memory(self.overrides) == expected(busy)

        return check

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)

    def polls(self) -> float:
        """Polls so far, whatever their outcome (allocwatch_polls_total)."""
        return sum(
            self.metric("allocwatch_polls_total", result=outcome) or 0 for outcome in PollOutcome
        )
