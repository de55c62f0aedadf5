"""Where a poll's CPU goes (`make bench-breakdown`).

Runs a Watcher in this process against a fake kubelet serving 110 pods on 8
GPUs, pausing between polls as in real use, and times each step of a poll
with the thread's CPU clock. Polls alternate: one finds a GPU pod gone or
back, so it writes; the next finds nothing new.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from allocwatch import publisher, watch
from allocwatch.logs import configure
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.podresources import PodResourcesClient
from allocwatch.profilesource import ProfileSource, load_devices
from allocwatch.publisher import OverridesPublisher
from allocwatch.watch import Watcher
from bench.watcher import NODE_PODS, PROFILE, REPLICAS, background_pods, replica_pods
from devtools.podresources import FakePodResourcesLister

WHOLE = "whole poll"
ORDER = [
    "profile check",
    "List + claims",
    "claims -> readings",
    "readings -> our keys",
    "publish",
    "publish: read the file",
    "publish: render YAML",
    "publish: atomic write",
    "publish: the rest (lock, merge, compare)",
    "metrics + log",
]


class StepTimer:
    """Thread CPU spent in wrapped functions, summed per kind of poll and step."""

    def __init__(self) -> None:
        self.kind = "idle"
        self.ns: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def wrap(self, owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time_ns()
            try:
                return inner(*args, **kwargs)
            finally:
                self.ns[self.kind][label] += time.thread_time_ns() - started

        setattr(owner, name, timed)


def measure(polls: int, gap: float) -> dict[str, dict[str, float]]:
    """Mean thread CPU in ms per poll for each step, of writing and of idle polls."""
    tmp = Path(tempfile.mkdtemp(prefix="awbd-", dir="/tmp"))
    try:
        config = tmp / "driver" / "config"
        config.mkdir(parents=True)
        shutil.copy(PROFILE, config / "config.yaml")
        overrides = config / "overrides.yaml"
        devices = load_devices(PROFILE)
        gpu_pods = replica_pods(devices, REPLICAS)
        base = background_pods(NODE_PODS - len(gpu_pods))
        with FakePodResourcesLister(tmp / "k.sock") as kubelet:
            kubelet.set_pods(base + gpu_pods)
            client = PodResourcesClient(kubelet.socket_path)
            try:
                if not client.wait_ready(10):
                    raise RuntimeError("the fake kubelet is not reachable")
                watcher = Watcher(
                    client,
                    ProfileSource(config / "config.yaml"),
                    OverridesPublisher(overrides),
                    fraction=0.5,
                    interval=gap,
                    metrics=Metrics(),
                )
                timer = StepTimer()
                timer.wrap(watcher.profile, "refresh", "profile check")
                timer.wrap(client, "list_claims", "List + claims")
                timer.wrap(watch, "read", "claims -> readings")
                timer.wrap(watch, "publication", "readings -> our keys")
                timer.wrap(watcher.publisher, "publish", "publish")
                timer.wrap(watcher.publisher, "_current", "publish: read the file")
                timer.wrap(watcher.publisher, "render", "publish: render YAML")
                timer.wrap(publisher, "write_atomic", "publish: atomic write")
                timer.wrap(watcher.reporter, "published", "metrics + log")
                watcher.poll()  # the first publish; caches filled
                timer.ns.clear()
                for i in range(2 * polls):
                    writing = i % 2 == 0
                    if writing:
                        # Every other writing poll removes one GPU pod; the next restores it.
                        step = i // 2
                        gone = (step // 2) % len(gpu_pods) if step % 2 == 0 else -1
                        kubelet.set_pods(base + [p for n, p in enumerate(gpu_pods) if n != gone])
                    timer.kind = "writing" if writing else "idle"
                    time.sleep(gap)
                    # every write renames a new file in: a new inode while the old one lives
                    before = os.stat(overrides).st_ino
                    started = time.thread_time_ns()
                    outcome = watcher.poll()
                    timer.ns[timer.kind][WHOLE] += time.thread_time_ns() - started
                    wrote = os.stat(overrides).st_ino != before
                    if outcome is not PollOutcome.OK or wrote != writing:
                        raise RuntimeError(f"poll {i}: expected wrote={writing}, got {outcome}")
            finally:
                client.close()
        result = {
            kind: {label: ns / polls / 1e6 for label, ns in steps.items()}
            for kind, steps in timer.ns.items()
        }
        for steps in result.values():
            parts = sum(ms for label, ms in steps.items() if label.startswith("publish: "))
            steps["publish: the rest (lock, merge, compare)"] = steps["publish"] - parts
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--polls", type=int, default=40, help="polls of each kind")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between polls")
    args = parser.parse_args()
    # Log as the CLI does, one line per change, but not onto this table.
    configure("text", "info")
    with open(os.devnull, "w") as devnull:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(devnull)
        result = measure(args.polls, args.gap)
    print(
        f"Thread CPU per poll, mean of {args.polls} polls of each kind, "
        f"{args.gap:g}s between polls ({NODE_PODS} pods, {len(load_devices(PROFILE))} GPUs):\n"
    )
    print("| step | writing poll | idle poll |")
    print("|---|---|---|")
    for label in (WHOLE, *ORDER):
        cells = [f"{result[kind].get(label, 0.0):.2f} ms" for kind in ("writing", "idle")]
        print(f"| {label} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
