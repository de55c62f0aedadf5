"""allocwatch deployed by its chart, and the readings it publishes, read through its pod.

Reading the document inside the watcher pod (which mounts nvml-mock's root)
works on every provider; the pod's name is kept between polls.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from devtools.waiting import wait_until

from . import timings
from .diagnostics import Section
from .expected import (
    Activity,
    Processes,
    Readings,
    activity_blocks,
    memory_readings,
    process_lists,
)
from .helm import Helm
from .kubectl import KubectlError
from .nodefiles import NodeFiles, script
from .pods import Pods
from .providers import REPO_ROOT

CHART = REPO_ROOT / "charts" / "allocwatch"
RELEASE = "allocwatch"
WATCHER_LABELS = f"app.kubernetes.io/name=allocwatch,app.kubernetes.io/instance={RELEASE}"


class AllocwatchRelease:
    def __init__(
        self, pods: Pods, helm: Helm, files: NodeFiles, values: Path, metrics_port: int
    ) -> None:
        self.pods = pods
        self.helm = helm
        self.files = files
        # the values file the release is installed with
        self.values = values
        self.metrics_port = metrics_port
        self.installed = False
        # NOTES helm printed at the last install
        self.notes = ""
        self._reader: str | None = None

    def install(self) -> None:
        out = self.helm.upgrade_install(RELEASE, CHART, self.pods.namespace, self.values)
        self.installed = True
        self.notes = out.partition("NOTES:")[2]
        self.pod()

    def ensure(self) -> None:
        if not self.installed:
            self.install()

    def uninstall(self) -> None:
        """Uninstall, and wait until no watcher runs (one could still write the file)."""
        self.helm.uninstall(RELEASE, self.pods.namespace)
        self.installed = False
        self._reader = None
        self.pods.wait_gone(WATCHER_LABELS)

    def pod(self, timeout: float = 120) -> str:
        return self.pods.wait_ready(WATCHER_LABELS, timeout)

    def ready_pod(self) -> str | None:
        return self.pods.ready(WATCHER_LABELS)

    def metric(self, pod: str, sample: str) -> float:
        """One sample of the watcher's /metrics, read inside its pod."""
        port = str(self.metrics_port)
        return float(self.pods.python(pod, script("watcher_metric"), port, sample))

    def readyz(self, pod: str) -> tuple[int, str]:
        """(HTTP status, body) of the watcher's /readyz, asked inside its pod."""
        status, body = self.pods.python(pod, script("watcher_readyz"), str(self.metrics_port))
        return int(status), str(body)

    def read_document(self) -> tuple[bool, Any]:
        """(exists, parsed overrides.yaml), read in the watcher pod."""
        # The pod name is cached between polls; a failed exec forgets it.
        pod = self._reader = self._reader or self.pod(timeout=30)
        try:
            return self.files.read(pod)
        except KubectlError:
            self._reader = None
            raise

    def readings(self) -> Readings | None:
        return memory_readings(self.read_document()[1])

    def wait_readings(self, expected: Readings, timeout: float, what: str) -> Readings:
        """Poll the document until its memory readings equal `expected` (exactly)."""
        start = time.monotonic()

        def matches() -> Readings | None:
            current = self.readings()
            return current if current == expected else None

        readings = wait_until(
            matches, timeout, f"{what}: readings {expected}", diagnostics=self.pods.diagnostics
        )
        timings.note(what, time.monotonic() - start)
        return readings

    def wait_processes(self, expected: Processes, timeout: float, what: str) -> Processes:
        """Poll the document until its `processes` lists equal `expected` (exactly)."""
        start = time.monotonic()

        # wrapped: an empty list of processes is a match, and wait_until waits while falsy
        def matches() -> tuple[Processes] | None:
            current = process_lists(self.read_document()[1])
            return (current,) if current == expected else None

        (found,) = wait_until(
            matches, timeout, f"{what}: processes {expected}", diagnostics=self.pods.diagnostics
        )
        timings.note(what, time.monotonic() - start)
        return found

    def wait_activity(self, expected: Activity, timeout: float, what: str) -> Activity:
        """Poll the document until its activity blocks equal `expected` (exactly)."""
        start = time.monotonic()

        def matches() -> Activity | None:
            current = activity_blocks(self.read_document()[1])
            return current if current == expected else None

        found = wait_until(
            matches, timeout, f"{what}: activity {expected}", diagnostics=self.pods.diagnostics
        )
        timings.note(what, time.monotonic() - start)
        return found

    def diagnostics(self) -> list[Section]:
        return [
            (
                f"watcher logs {pod}",
                lambda p=pod: self.pods.kubectl.logs(self.pods.namespace, p, tail=30),
            )
            for pod in self.pods.names(WATCHER_LABELS)
        ]
