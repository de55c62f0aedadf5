"""Benchmark the allocwatch CLI against a fake kubelet (`make bench`).

For each interval: 110 pods on 8 GPUs, 100 scripted allocation changes, and an
idle window. Reports change→file latency (p50/p95), CPU per poll, peak RSS and
file writes per minute idle and busy, as a Markdown table. A last row runs the
default interval at scale: 2,000 claims (250 time-sliced replicas a GPU, a
pod each), where an idle poll must cost about what it costs with 16. With
--declared-load, one more row runs the default interval with the option on:
every one of the 110 pods annotated on a real kube-apiserver (the local
cluster's build), declaring a utilization band, so the memory expected is
unchanged and the cost is the watch's and the loads' alone.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from allocwatch.document import parse_document
from allocwatch.durations import parse_duration
from allocwatch.flags import DEFAULT_INTERVAL
from allocwatch.profile import Device
from allocwatch.profilesource import load_devices
from bench.filewrites import FileWrites
from bench.launch import expected_used, kill_if_running, start_watcher
from bench.proc import cpu_seconds, peak_rss_mib, thread_cpu_seconds
from devtools.documents import memory
from devtools.kubeapiserver import ApiServer, locate
from devtools.podresources import FakePodResourcesLister, gpu_pod

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "tests" / "data" / "a100.yaml"
# Every benchmark's node holds this many pods: the kubelet's default maxPods.
NODE_PODS = 110


@dataclass
class Result:
    interval: str
    claims: int
    p50_ms: float
    p95_ms: float
    idle_poll_thread_ms: float
    idle_process_ms: float
    busy_poll_thread_ms: float
    busy_process_ms: float
    cpu_s_per_hour: float
    rss_mib: float
    idle_writes_per_min: float
    busy_writes_per_min: float


REPLICAS = 2  # time-slicing replicas per GPU in the benchmark's node
SCALE_REPLICAS = 250  # the scale row's: 2,000 claims on 8 GPUs


def replica_pods(devices: list[Device], replicas: int) -> list[dict[str, Any]]:
    """`replicas` pods per GPU, `<uuid>::0`, `<uuid>::1`, ..., in device order."""
    return [
        gpu_pod("ml", f"train-{d.index}-{r}", [f"{d.uuid}::{r}"])
        for d in devices
        for r in range(replicas)
    ]


def background_pods(n: int) -> list[dict[str, Any]]:
    """Pods that hold no GPU: the List payload a busy node carries anyway."""
    return [
        gpu_pod("default", f"web-{i}", [f"nic-{i}"], resource="example.com/nic") for i in range(n)
    ]


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("allocwatch_polls_total", "allocwatch_declared_load_stale")):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def polls(m: dict[str, float]) -> float:
    return sum(v for k, v in m.items() if k.startswith("allocwatch_polls_total"))


def settled(port: int, seconds_per_poll: float) -> None:
    """Return once the pods' annotations are in and two polls have run since: the
    loads they declare are published before the idle window starts, not in it."""
    deadline = time.monotonic() + 30
    while scrape(port).get("allocwatch_declared_load_stale", 1) != 0:
        assert time.monotonic() < deadline, "the annotations never arrived"
        time.sleep(0.05)
    after = polls(scrape(port)) + 2
    while polls(scrape(port)) < after:
        assert time.monotonic() < deadline + 10 * seconds_per_poll, "no polls"
        time.sleep(0.05)


class FileReadings:
    """used_bytes per device in the override file, re-parsed only when the file changed.

    The benchmark polls this every millisecond; parsing each time would make it
    compete with the watcher for the machine's two cores.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stat: tuple[int, int, int] | None = None
        self._used: dict[str, int] = {}

    def used(self) -> dict[str, int]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return {}
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self._stat:
            try:
                doc = parse_document(self.path.read_text())
            except (FileNotFoundError, ValueError):
                return {}
            self._stat = key
            self._used = {k: v.get("used_bytes") for k, v in memory(doc).items()}
        return self._used


def annotated(pods: list[dict[str, Any]], node: str) -> str:
    """The pods, as manifests bound to `node`, each declaring a utilization band."""
    return yaml.safe_dump_all(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": p["name"],
                "namespace": p["namespace"],
                "annotations": {"allocwatch.dev/gpu-utilization": f"{i % 50}-{i % 50 + 40}"},
            },
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        }
        for i, p in enumerate(pods)
    )


@contextlib.contextmanager
def declared_load(pods: list[dict[str, Any]]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """A kube-apiserver holding `pods` annotated; the watcher's flags and environment."""
    with (
        tempfile.TemporaryDirectory(prefix="awb-api-") as tmp,
        ApiServer(locate(), Path(tmp)) as api,
    ):
        for namespace in sorted({p["namespace"] for p in pods} - {"default"}):
            api.kubectl("create", "namespace", namespace)
        api.kubectl("apply", "-f", "-", stdin=annotated(pods, "bench-node"))
        extra = ["--declared-load", "--kubeconfig", str(api.kubeconfig)]
        yield extra, {**os.environ, "NODE_NAME": "bench-node"}


def run_interval(
    interval: str,
    changes: int,
    idle_s: float,
    seed: int,
    replicas: int = REPLICAS,
    declared: bool = False,
) -> Result:
    tmp = Path(tempfile.mkdtemp(prefix="awb-", dir="/tmp"))
    proc = None
    try:
        config = tmp / "driver" / "config"
        config.mkdir(parents=True)
        shutil.copy(PROFILE, config / "config.yaml")
        target = config / "overrides.yaml"
        devices = load_devices(PROFILE)
        rng = random.Random(seed)
        with FakePodResourcesLister(tmp / "k.sock") as kubelet:
            gpu_pods = replica_pods(devices, replicas)
            base = background_pods(max(0, NODE_PODS - len(gpu_pods)))
            active = [True] * len(gpu_pods)
            kubelet.set_pods(base + gpu_pods)
            with contextlib.ExitStack() as api:
                extra, env = (
                    api.enter_context(declared_load(base + gpu_pods)) if declared else ([], None)
                )
                proc, port = start_watcher(kubelet, tmp / "driver", interval, extra=extra, env=env)
                deadline = time.monotonic() + 10
                while not target.exists():
                    assert time.monotonic() < deadline, "no first publish"
                    time.sleep(0.005)

                def expected() -> dict[str, int]:
                    counts = {d.index: 0 for d in devices}
                    for i, on in enumerate(active):  # pod i is on devices[i // replicas]
                        counts[devices[i // replicas].index] += on
                    return {str(d.index): expected_used(d, counts[d.index]) for d in devices}

                if declared:
                    settled(port, seconds_per_poll=parse_duration(interval))
                readings = FileReadings(target)
                # Writes are counted on the file itself (inotify), not taken from
                # the watcher's own counter.
                writes = FileWrites(target)
                # idle window
                writes.drain()
                w0 = writes.writes
                m0, c0 = scrape(port), cpu_seconds(proc.pid)
                main0 = thread_cpu_seconds(proc.pid, proc.pid)
                time.sleep(idle_s)
                # The CPU clocks before each scrape: serving /metrics is the
                # benchmark's cost, not a poll's (1.5-2.6 ms of the watcher's CPU each).
                c1, main1 = cpu_seconds(proc.pid), thread_cpu_seconds(proc.pid, proc.pid)
                m1 = scrape(port)
                idle_polls = polls(m1) - polls(m0)
                writes.drain()
                idle_writes = writes.writes - w0

                # busy: scripted changes, each at a random phase of the poll cycle
                seconds = parse_duration(interval)
                latencies = []
                wb0 = writes.writes
                b0, busy_start = scrape(port), time.monotonic()
                c1b, main1b = cpu_seconds(proc.pid), thread_cpu_seconds(proc.pid, proc.pid)
                for _ in range(changes):
                    time.sleep(rng.uniform(0, seconds))
                    i = rng.randrange(len(gpu_pods))
                    active[i] = not active[i]
                    kubelet.set_pods(
                        base + [p for p, on in zip(gpu_pods, active, strict=True) if on]
                    )
                    t0 = time.monotonic()
                    want = expected()
                    # Re-read the file only when it is written, rather than polling
                    # it on the cores the watcher is being measured on.
                    if not writes.wait_for(readings.used, want, 10 * seconds + 5):
                        raise RuntimeError("change never reached the file")
                    latencies.append(time.monotonic() - t0)
                busy_s = time.monotonic() - busy_start
                c2, main2 = cpu_seconds(proc.pid), thread_cpu_seconds(proc.pid, proc.pid)
                b1 = scrape(port)
                busy_polls = polls(b1) - polls(b0)
                writes.drain()
                busy_writes = writes.writes - wb0
                rss = peak_rss_mib(proc.pid)
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
                writes.close()
        q = statistics.quantiles(latencies, n=100)
        idle_n, busy_n = max(1.0, idle_polls), max(1.0, busy_polls)
        return Result(
            interval=interval + (", declared load" if declared else ""),
            claims=len(gpu_pods),
            p50_ms=statistics.median(latencies) * 1e3,
            p95_ms=q[94] * 1e3,
            idle_poll_thread_ms=(main1 - main0) / idle_n * 1e3,
            idle_process_ms=(c1 - c0) / idle_n * 1e3,
            busy_poll_thread_ms=(main2 - main1b) / busy_n * 1e3,
            busy_process_ms=(c2 - c1b) / busy_n * 1e3,
            cpu_s_per_hour=(c1 - c0) / idle_s * 3600,
            rss_mib=rss,
            idle_writes_per_min=idle_writes / idle_s * 60,
            busy_writes_per_min=busy_writes / busy_s * 60,
        )
    finally:
        kill_if_running(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def median_result(runs: list[Result]) -> Result:
    """Each measured field's median over runs of one interval."""
    return Result(
        interval=runs[0].interval,
        claims=runs[0].claims,
        **{
            f.name: statistics.median(getattr(r, f.name) for r in runs)
            for f in dataclasses.fields(Result)
            if f.name not in ("interval", "claims")
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--intervals", default="250ms,500ms,1s,2s")  # 500ms: the default
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--idle", type=float, default=30.0, help="idle window, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--runs", type=int, default=1, help="runs per interval; each cell is their median"
    )
    parser.add_argument(
        "--declared-load",
        action="store_true",
        help="one more row at the default interval with --declared-load on (needs the local "
        "cluster's kube-apiserver build: hack/cluster/build.sh)",
    )
    parser.add_argument(
        "--scale-interval",
        default="500ms",
        help="the interval of the 2,000-claim row; empty skips it",
    )
    args = parser.parse_args()
    print(
        f"allocwatch benchmark: {NODE_PODS} pods, {len(load_devices(PROFILE))} GPUs, "
        f"{args.changes} changes, "
        f"{args.idle:g}s idle; CPU {os.cpu_count()} cores",
        flush=True,
    )
    rows = []
    plan = [(interval, REPLICAS, False) for interval in args.intervals.split(",") if interval]
    if args.scale_interval:
        plan.append((args.scale_interval, SCALE_REPLICAS, False))
    if args.declared_load:
        plan.append((DEFAULT_INTERVAL, REPLICAS, True))
    for interval, replicas, declared in plan:
        runs = []
        for n in range(args.runs):
            run = run_interval(interval, args.changes, args.idle, args.seed + n, replicas, declared)
            runs.append(run)
            print(f"  {interval}: run {n + 1}/{args.runs} done", file=sys.stderr, flush=True)
        rows.append(median_result(runs))
    print()
    print(
        "| interval | claims | latency p50 | latency p95 | CPU/poll idle: poll thread | process "
        "| CPU/poll busy: poll thread | process | CPU s/h idle | peak RSS "
        "| writes/min idle | writes/min busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.interval} | {r.claims} | {r.p50_ms:.0f} ms | {r.p95_ms:.0f} ms "
            f"| {r.idle_poll_thread_ms:.2f} ms | {r.idle_process_ms:.2f} ms "
            f"| {r.busy_poll_thread_ms:.2f} ms | {r.busy_process_ms:.2f} ms "
            f"| {r.cpu_s_per_hour:.1f} | {r.rss_mib:.1f} MiB "
            f"| {r.idle_writes_per_min:.0f} | {r.busy_writes_per_min:.0f} |"
        )

    print()
    print(
        f"Idle: no allocation changes, so no writes. Busy: the {args.changes} changes, most "
        "polls writing. Poll thread: the thread that lists (it does the socket I/O too), "
        "reconciles and writes. Process: every thread, grpc's included, all CPU between "
        "polls counted too, divided by the polls; CPU s/h idle is the same total per hour."
    )


if __name__ == "__main__":
    main()
