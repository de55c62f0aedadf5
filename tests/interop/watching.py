"""The allocwatch CLI as a process beside upstream's tools, with its metrics readable."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from devtools.podresources import FakePodResourcesLister
from devtools.upstream import REPO


class Watching:
    """The allocwatch CLI on a driver root, with its metrics on a port of its own."""

    def __init__(self, kubelet: FakePodResourcesLister, config_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "allocwatch",
                "--socket", kubelet.socket_path,
                "--driver-root", str(config_dir.parent),
                "--interval", "100ms",
                "--metrics-address", "127.0.0.1:0",
            ],
            cwd=REPO, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            if m := re.search(r"on port (\d+)", line):
                self.port = int(m.group(1))
                break
        else:
            raise AssertionError("the watcher exited: " + "".join(self.log))
        self._drain = threading.Thread(target=self._keep_reading, daemon=True)
        self._drain.start()

    def _keep_reading(self) -> None:
        assert self.proc.stderr is not None
        self.log.extend(self.proc.stderr)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` that carry `labels`."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=10)
        self._drain.join(5)
        return code


@contextmanager
def watching(kubelet: FakePodResourcesLister, config_dir: Path) -> Iterator[Watching]:
    w = Watching(kubelet, config_dir)
    try:
        yield w
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()
