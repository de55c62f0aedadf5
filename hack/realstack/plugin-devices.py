#!/usr/bin/env python3
"""Ask a device plugin, as the kubelet would, what it advertises and allocates.

    plugin-devices.py SOCKET

Prints one `device <ID> <health>` line per device of the first ListAndWatch
response, then, for an Allocate of the first device, its `env NAME=value`,
`devspec <container path> <host path>` and `mount <container> <host>` lines.
Uses the project's committed device-plugin v1beta1 stubs.
"""

import sys

import grpc

from e2e.fakeplugin.deviceplugin.v1beta1 import api_pb2 as dp
from e2e.fakeplugin.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc


def main() -> int:
    with grpc.insecure_channel(f"unix://{sys.argv[1]}") as channel:
        stub = dp_grpc.DevicePluginStub(channel)
        stream = stub.ListAndWatch(dp.Empty(), timeout=30)
        devices = next(iter(stream)).devices
        stream.cancel()
        for device in devices:
            print("device", device.ID, device.health)
        request = dp.AllocateRequest(
            container_requests=[dp.ContainerAllocateRequest(devices_ids=[devices[0].ID])]
        )
        (response,) = stub.Allocate(request, timeout=30).container_responses
        for name, value in sorted(response.envs.items()):
            print(f"env {name}={value}")
        for spec in response.devices:
            print("devspec", spec.container_path, spec.host_path)
        for mount in response.mounts:
            print("mount", mount.container_path, mount.host_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
