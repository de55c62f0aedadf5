"""List's CPU per call with a given grpcio: the calling thread against grpc's others.

    python -m bench.grpcpool [--python PY ...] [--pause 1] [--calls 20]

The fake kubelet (110 pods on 8 GPUs) runs from this environment; a bare List
loop runs in each PY, an interpreter whose environment has some grpcio and
protobuf >= 7.35 and nothing else of ours. The loop makes the watcher's call
with the watcher's channel and callable (podresources.open_channel and
list_callable), less `_registered_method`, which older grpcio does not take.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def list_loop(socket_path: str, pause: float, calls: int) -> dict[str, object]:
    """Time `calls` Lists, `pause` seconds apart, in this process; imports only grpc."""
    import grpc

    from allocwatch.grpcruntime import open_channel
    from allocwatch.kubeletapi.podresources.v1 import api_pb2
    from allocwatch.podresources import list_callable

    channel = open_channel(socket_path)
    list_pods = list_callable(channel)  # no _registered_method: older grpcio lacks it
    request = api_pb2.ListPodResourcesRequest()
    for _ in range(5):  # connect, and start whatever threads grpc starts
        list_pods(request, timeout=5)
    in_calls = 0.0
    process0, thread0 = time.process_time(), time.thread_time()
    for _ in range(calls):
        time.sleep(pause)
        started = time.thread_time()
        list_pods(request, timeout=5)
        in_calls += time.thread_time() - started
    process1, thread1 = time.process_time(), time.thread_time()
    tasks = Path("/proc/self/task")
    names = sorted((tasks / tid / "comm").read_text().strip() for tid in os.listdir(tasks))
    channel.close()
    return {
        "grpcio": grpc.__version__,
        "calling_thread_ms": in_calls / calls * 1e3,
        "other_threads_ms": ((process1 - process0) - (thread1 - thread0)) / calls * 1e3,
        "threads": names,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", action="append", help="interpreter to run the loop in")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between calls")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--loop-socket", help=argparse.SUPPRESS)  # the loop's own process
    args = parser.parse_args()
    if args.loop_socket:
        print(json.dumps(list_loop(args.loop_socket, args.pause, args.calls)))
        return

    from allocwatch.profilesource import load_devices
    from bench.watcher import NODE_PODS, PROFILE, REPLICAS, REPO, background_pods, replica_pods
    from devtools.podresources import FakePodResourcesLister

    pythons = args.python or [sys.executable]
    print(f"List, {NODE_PODS} pods, {args.calls} calls {args.pause:g}s apart, CPU ms per call:\n")
    print("| grpcio | calling thread | other threads | threads |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="awgp-") as tmp:
        gpu_pods = replica_pods(load_devices(PROFILE), REPLICAS)
        pods = background_pods(NODE_PODS - len(gpu_pods)) + gpu_pods
        with FakePodResourcesLister(Path(tmp) / "k.sock") as kubelet:
            kubelet.set_pods(pods)
            for python in pythons:
                loop = subprocess.run(
                    [
                        python,
                        "-m",
                        "bench.grpcpool",
                        "--loop-socket",
                        kubelet.socket_path,
                        "--pause",
                        str(args.pause),
                        "--calls",
                        str(args.calls),
                    ],
                    cwd=REPO,
                    env=dict(os.environ, PYTHONPATH=str(REPO)),
                    capture_output=True,
                    text=True,
                )
                if loop.returncode != 0:
                    sys.exit(f"{python}: the List loop failed:\n{loop.stderr}")
                r = json.loads(loop.stdout.splitlines()[-1])
                print(
                    f"| {r['grpcio']} | {r['calling_thread_ms']:.2f} | "
                    f"{r['other_threads_ms']:.2f} | {', '.join(r['threads'])} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
