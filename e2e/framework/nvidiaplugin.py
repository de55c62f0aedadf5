"""NVIDIA's device plugin, run as upstream's tests/e2e/device-plugin-mock.yaml runs it.

The manifest is e2e/realstack/device-plugin.yaml with the locally built image;
time-slicing is its ConfigMap (device-plugin-timeslicing.yaml), read by the
plugin at start.
"""

from __future__ import annotations

from devtools.waiting import wait_until

from .diagnostics import Section
from .pods import Pods
from .providers import REPO_ROOT

FILES = REPO_ROOT / "e2e" / "realstack"
MANIFEST = FILES / "device-plugin.yaml"
TIME_SLICING = FILES / "device-plugin-timeslicing.yaml"
LABELS = "name=nvidia-device-plugin-mock"
RESOURCE = "nvidia.com/gpu"
# the image the committed manifest names, replaced by the one built here
MANIFEST_IMAGE = "image: localhost/k8s-device-plugin:v0.18.2"


class NvidiaDevicePlugin:
    def __init__(self, pods: Pods, image: str) -> None:
        # pods: the plugin's namespace (kube-system), on the node under test
        self.pods = pods
        self.image = image

    def deploy(self, gpus: int, replicas: int) -> None:
        """Each of the node's `gpus` advertised `replicas` times (time-slicing when > 1);
        wait until the node's allocatable says so."""
        kubectl = self.pods.kubectl
        kubectl.apply(MANIFEST.read_text().replace(MANIFEST_IMAGE, f"image: {self.image}"))
        if replicas > 1:
            kubectl.apply(TIME_SLICING.read_text())
        # The plugin reads its config at start: a new pod for a new config.
        kubectl.delete("pods", "-n", self.pods.namespace, "-l", LABELS, wait=True)
        self.pods.wait_ready(LABELS)
        advertised = gpus * replicas
        wait_until(
            lambda: self.allocatable() == advertised,
            60,
            f"{RESOURCE} allocatable {advertised} on {self.pods.node}",
            diagnostics=self.pods.diagnostics,
        )

    def allocatable(self) -> int:
        node = self.pods.kubectl.get("node", self.pods.node)
        return int(node["status"].get("allocatable", {}).get(RESOURCE, "0"))

    def remove(self) -> None:
        self.pods.kubectl.delete("-f", str(MANIFEST), wait=True)

    def diagnostics(self) -> list[Section]:
        kubectl, ns = self.pods.kubectl, self.pods.namespace
        return [
            (f"logs {ns}/{name}", lambda n=name: kubectl.logs(ns, n, tail=30))
            for name in self.pods.names(LABELS)
        ]
