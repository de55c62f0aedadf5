"""What the declared-load pod watch costs (`make bench-podwatch`).

A real kube-apiserver and etcd (kubeapiserver/, the local cluster's build)
hold `--pods` annotated pods bound to one node, created with kubectl as a
kubelet's pods would be. A child process runs PodWatch on that node and
reports its CPU (the kernel's CPU clock of the process) and memory (VmRSS,
RssAnon, VmHWM) at each step: imported (allocwatch.podwatch only), started
(lightkube imported, client built), listed (every pod's load in the snapshot),
after an idle window of the watch alone, and after `--changes` annotation
edits made with kubectl one at a time (their CPU is the window's less the idle
rate). It also times the calls the poll loop makes each poll, and stop()
with the API server frozen (SIGSTOP) under the open watch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import yaml

from bench.proc import cpu_seconds
from devtools.kubeapiserver import ApiServer, locate

NODE = "bench-node"
NAMESPACE = "bench"
GI = 2**30


def child(kubeconfig: str, pods: int) -> None:
    """The measured process: one JSON line per step, on request from stdin."""
    from allocwatch.podwatch import PodWatch

    def report(step: str, **extra: Any) -> None:
        status = dict(
            line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
        )
        kib = {k: int(status[k].split()[0]) for k in ("VmRSS", "RssAnon", "VmHWM")}
        print(json.dumps({"step": step, "cpu": time.process_time(), **kib, **extra}), flush=True)

    report("imported")
    watch = PodWatch(NODE, kubeconfig=kubeconfig)
    watch.start()
    report("started")
    while len(watch.loads()) < pods:
        time.sleep(0.005)
    report("listed")
    for line in sys.stdin:
        if line.strip() == "calls":
            n = 100_000
            per = timeit.timeit(lambda: (watch.loads(), watch.health()), number=n) / n
            report("calls", per_call_ns=per * 1e9)
        elif line.strip() == "stop":
            began = time.monotonic()
            watch.stop(5.0)
            assert watch._thread is not None
            report("stop", seconds=time.monotonic() - began, alive=watch._thread.is_alive())
            return
        else:
            total = sum(load.memory_bytes or 0 for load in watch.loads().values())
            report(line.strip(), memory_total=total, current=watch.health().current)
    watch.stop()


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"gpu-{i}",
            "labels": {"app": "bench"},
            "annotations": {
                "allocwatch.dev/gpu-memory": f"{i % 40 + 1}Gi",
                "allocwatch.dev/gpu-utilization": f"{i % 50}-{i % 50 + 40}",
            },
        },
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox"}]},
    }


def ask(proc: subprocess.Popen[str], command: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    return dict(json.loads(proc.stdout.readline()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument(
        "--idle", type=float, default=65.0, help="seconds: one server-side watch end"
    )
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--child", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pods)
        return
    with (
        tempfile.TemporaryDirectory(prefix="aw-podwatch-") as tmp,
        ApiServer(locate(), Path(tmp)) as api,
    ):
        api.kubectl("create", "namespace", NAMESPACE)
        api.kubectl(
            "apply",
            "-n",
            NAMESPACE,
            "-f",
            "-",
            stdin=yaml.safe_dump_all(pod(i) for i in range(args.pods)),
        )
        argv = [sys.executable, "-m", "bench.podwatch", "--child", str(api.kubeconfig)]
        argv += ["--pods", str(args.pods)]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            steps = [json.loads(proc.stdout.readline()) for _ in range(3)]
            print(f"  listed {args.pods} pods; idle for {args.idle:.0f} s", file=sys.stderr)
            idle_start = cpu_seconds(proc.pid)
            time.sleep(args.idle)
            idle_cpu = cpu_seconds(proc.pid) - idle_start
            steps.append(ask(proc, "idle"))
            print(f"  {args.changes} annotation edits", file=sys.stderr)
            began, start_cpu = time.monotonic(), cpu_seconds(proc.pid)
            expected = sum(i % 40 + 1 for i in range(args.pods)) * GI
            for n in range(args.changes):
                i = n % args.pods
                value = f"{i % 40 + 1 + n // args.pods + 1}Gi"  # 1 GiB more each time
                edit = f"allocwatch.dev/gpu-memory={value}"
                api.kubectl("annotate", "-n", NAMESPACE, f"pod/gpu-{i}", edit, "--overwrite")
                expected += GI
            deadline = time.monotonic() + 30
            while (changed := ask(proc, "changed"))["memory_total"] != expected:
                assert time.monotonic() < deadline, f"the edits did not all arrive: {changed}"
                time.sleep(0.1)
            window = time.monotonic() - began
            change_cpu = cpu_seconds(proc.pid) - start_cpu - idle_cpu / args.idle * window
            steps.append(changed)
            calls = ask(proc, "calls")
            # stop() with the API server frozen under an open watch, as at a SIGTERM
            api.pause()
            time.sleep(1)
            stopped = ask(proc, "stop")
        finally:
            proc.kill()
            proc.wait()
    show(steps, args, idle_cpu, change_cpu, calls, stopped)


def show(
    steps: list[dict[str, Any]],
    args: argparse.Namespace,
    idle_cpu: float,
    change_cpu: float,
    calls: dict[str, Any],
    stopped: dict[str, Any],
) -> None:
    print(f"\nPodWatch on one node of a real kube-apiserver, {args.pods} annotated pods:\n")
    print("| step | CPU since the previous step | VmRSS | RssAnon | VmHWM |")
    print("|---|---|---|---|---|")
    names = {
        "imported": "import allocwatch.podwatch",
        "started": "start(): lightkube imported, client built",
        "listed": f"first list: {args.pods} pods in the snapshot",
        "idle": f"idle watch, {args.idle:.0f} s",
        "changed": f"{args.changes} annotation edits",
    }
    previous = None
    for step in steps:
        cpu = "" if previous is None else f"{(step['cpu'] - previous) * 1000:.0f} ms"
        previous = step["cpu"]
        mib = " | ".join(f"{step[k] / 1024:.1f} MiB" for k in ("VmRSS", "RssAnon", "VmHWM"))
        print(f"| {names[step['step']]} | {cpu} | {mib} |")
    print(f"\nIdle watch: {idle_cpu * 1000:.1f} ms of CPU in {args.idle:.0f} s "
          f"({idle_cpu / args.idle * 3600:.2f} CPU-s/h).")  # fmt: skip
    print(f"Per annotation edit: {change_cpu / args.changes * 1000:.2f} ms of CPU.")
    print(f"loads() + health(), the poll loop's calls: {calls['per_call_ns']:.0f} ns.")
    ended = "ended" if not stopped["alive"] else "STILL RUNNING"
    print(f"stop() under a frozen API server: {stopped['seconds'] * 1000:.1f} ms, thread {ended}.")


if __name__ == "__main__":
    main()
