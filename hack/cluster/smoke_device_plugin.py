"""Device-plugin half of the cluster smoke test (run from the repository root
as a host process, with the project's Python):

    python hack/cluster/smoke_device_plugin.py serve [--resource R] [--devices N]
        Serve a trivial device plugin for resource R (N healthy devices named
        SMOKE-0..N-1) on a socket in /var/lib/kubelet/device-plugins and
        register it with the kubelet through kubelet.sock. Runs until SIGTERM;
        re-registers if the kubelet restarts (its own socket disappears).

    python hack/cluster/smoke_device_plugin.py list NAMESPACE POD [--resource R]
        Print, one per line, the device ids the kubelet's pod-resources List
        reports for the pod's containers and resource R. Exit 1 if none.
"""

import argparse
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

from allocwatch.kubeletapi.podresources.v1 import api_pb2 as pr
from allocwatch.kubeletapi.podresources.v1 import api_pb2_grpc as pr_grpc
from e2e.fakeplugin.deviceplugin.v1beta1 import api_pb2 as dp
from e2e.fakeplugin.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCK = os.path.join(PLUGIN_DIR, "kubelet.sock")
POD_RESOURCES_SOCK = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_RESOURCE = "smoke.allocwatch.local/dev"
CHANNEL_OPTIONS = [("grpc.default_authority", "localhost")]


class Plugin(dp_grpc.DevicePluginServicer):
    def __init__(self, ids, stop):
        self.ids = ids
        self.stop = stop

    def GetDevicePluginOptions(self, request, context):
        return dp.DevicePluginOptions()

    def ListAndWatch(self, request, context):
        yield dp.ListAndWatchResponse(devices=[dp.Device(ID=i, health="Healthy") for i in self.ids])
        # The device list never changes; hold the stream open until the
        # kubelet goes away or we are told to stop.
        while context.is_active() and not self.stop.wait(1):
            pass

    def Allocate(self, request, context):
        # One response per container request; env only, no host paths.
        return dp.AllocateResponse(
            container_responses=[
                dp.ContainerAllocateResponse(envs={"SMOKE_DEVICES": ",".join(r.devices_ids)})
                for r in request.container_requests
            ]
        )

    def PreStartContainer(self, request, context):
        return dp.PreStartContainerResponse()


def serve(args):
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ids = [f"SMOKE-{i}" for i in range(args.devices)]
    endpoint = f"allocwatch-smoke-{os.getpid()}.sock"
    path = os.path.join(PLUGIN_DIR, endpoint)

    while not stop.is_set():
        if os.path.exists(path):
            os.unlink(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=CHANNEL_OPTIONS)
        dp_grpc.add_DevicePluginServicer_to_server(Plugin(ids, stop), server)
        server.add_insecure_port("unix://" + path)
        server.start()
        # Serving before registering: the kubelet dials back during Register.
        with grpc.insecure_channel("unix://" + KUBELET_SOCK, options=CHANNEL_OPTIONS) as ch:
            grpc.channel_ready_future(ch).result(timeout=30)
            request = dp.RegisterRequest(
                version="v1beta1", endpoint=endpoint, resource_name=args.resource
            )
            dp_grpc.RegistrationStub(ch).Register(request, timeout=10)
        print(f"registered {args.resource} {ids} at {path}", flush=True)
        # A restarting kubelet deletes every plugin socket; register again then.
        while not stop.is_set() and os.path.exists(path):
            stop.wait(1)
        server.stop(grace=1).wait()
        if not stop.is_set():
            print("plugin socket removed (kubelet restart?); re-registering", flush=True)
            time.sleep(1)
    if os.path.exists(path):
        os.unlink(path)
    return 0


def list_devices(args):
    with grpc.insecure_channel("unix://" + POD_RESOURCES_SOCK, options=CHANNEL_OPTIONS) as ch:
        resp = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=10)
    ids = [
        dev_id
        for pod in resp.pod_resources
        if pod.namespace == args.namespace and pod.name == args.pod
        for ctr in pod.containers
        for dev in ctr.devices
        if dev.resource_name == args.resource
        for dev_id in dev.device_ids
    ]
    for i in ids:
        print(i)
    return 0 if ids else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--resource", default=DEFAULT_RESOURCE)
    s.add_argument("--devices", type=int, default=2)
    s.set_defaults(func=serve)
    ls = sub.add_parser("list")
    ls.add_argument("namespace")
    ls.add_argument("pod")
    ls.add_argument("--resource", default=DEFAULT_RESOURCE)
    ls.set_defaults(func=list_devices)
    args = ap.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
