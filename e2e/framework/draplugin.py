"""The fake DRA kubelet plugin's DaemonSet, and the ResourceSlice it publishes.

The plugin (`e2e/fakedra`, run from the fakeplugin image) registers the driver
`gpu.nvidia.com` with the kubelet and publishes the profile's GPUs as
`gpu-<index>` devices (the e2e profile gives no minor numbers). Its RBAC is
cluster-scoped, and so are the DeviceClass and ResourceSlice it creates:
`remove` deletes them all, after the pods holding its claims.
"""

from __future__ import annotations

from devtools.waiting import wait_until

from .diagnostics import Section
from .manifests import render
from .pods import Pods
from .workloads import GPU_POD_LABELS

NAME = "fakedra"
LABELS = f"app.kubernetes.io/name={NAME}"
DRIVER = "gpu.nvidia.com"


class FakeDraPlugin:
    def __init__(
        self,
        pods: Pods,
        image: str,
        nvml_mock_root: str,
        kubelet_root: str,
    ) -> None:
        self.pods = pods
        self.image = image
        self.nvml_mock_root = nvml_mock_root
        self.kubelet_root = kubelet_root
        # deployed and not removed since (by the tests that need it)
        self.deployed = False

    def deploy(self, gpus: int) -> None:
        """Run the plugin; wait until the node's ResourceSlice lists `gpus` GPUs."""
        self.deployed = True
        self.pods.kubectl.apply(
            render(
                "fakedra.yaml.j2",
                namespace=self.pods.namespace,
                node=self.pods.node,
                image=self.image,
                nvml_mock_root=self.nvml_mock_root,
                kubelet_root=self.kubelet_root,
                args=[],
            )
        )
        self.pods.wait_rollout(NAME, LABELS)
        self.wait_slice(gpus, 90)

    def slice_devices(self) -> list[str]:
        """The device names in the node's ResourceSlices of our driver."""
        slices = self.pods.kubectl.get("resourceslices")["items"]
        return sorted(
            device["name"]
            for s in slices
            if s["spec"].get("driver") == DRIVER and s["spec"].get("nodeName") == self.pods.node
            for device in s["spec"].get("devices", [])
        )

    def wait_slice(self, gpus: int, timeout: float) -> None:
        wanted = sorted(f"gpu-{i}" for i in range(gpus))
        wait_until(
            lambda: self.slice_devices() == wanted,
            timeout,
            f"the node's ResourceSlice to list {wanted}",
            interval=0.5,
            diagnostics=self.pods.diagnostics,
        )

    def pod(self) -> str:
        return self.pods.wait_ready(LABELS, timeout=60)

    def registrations(self) -> int:
        logs = self.pods.kubectl.logs(self.pods.namespace, self.pod())
        return logs.count(f"registered with the kubelet as {DRIVER}")

    def remove(self) -> None:
        """Pods first: without the plugin the kubelet cannot unprepare their claims."""
        kubectl, ns = self.pods.kubectl, self.pods.namespace
        kubectl.delete("pods", "-n", ns, "-l", GPU_POD_LABELS, wait=True)
        kubectl.delete("resourceclaims,resourceclaimtemplates", "-n", ns, "--all", wait=True)
        kubectl.delete("daemonset", NAME, "-n", ns, wait=True)
        kubectl.delete("serviceaccount", NAME, "-n", ns)
        kubectl.delete("clusterrolebinding,clusterrole", f"{NAME}-{ns}", wait=True)
        kubectl.delete("resourceslices", "--field-selector", f"spec.driver={DRIVER}", wait=True)
        kubectl.delete("deviceclass", DRIVER, wait=True)
        self.deployed = False

    def diagnostics(self) -> list[Section]:
        kubectl, ns = self.pods.kubectl, self.pods.namespace
        sections: list[Section] = [
            ("ResourceSlice devices", lambda: ", ".join(self.slice_devices())),
            (
                "ResourceClaims",
                lambda: kubectl.run("get", "resourceclaims", "-n", ns, "-o", "wide"),
            ),
        ]
        for pod in self.pods.names(LABELS):
            sections.append((f"DRA plugin logs {pod}", lambda p=pod: kubectl.logs(ns, p, tail=20)))
        return sections
