"""NVIDIA's DRA driver for GPUs, installed by its own chart as a user installs it.

The chart (from the pinned tarball, hack/upstream/dra-driver.sh) gets
e2e/realstack/dra-driver-values.yaml: the mock driver root, GPUs on, compute
domains off. It runs the GPU kubelet plugin as a DaemonSet on nodes labelled
`nvidia.com/gpu.present=true` (nvml-mock's setup.sh sets it) and creates the
`gpu.nvidia.com` DeviceClass. The plugin publishes one ResourceSlice pool for
the node, each GPU as `gpu-<minor>` with its `uuid` attribute.
"""

from __future__ import annotations

from devtools.waiting import wait_until

from .diagnostics import Section
from .draplugin import DRIVER
from .helm import Helm
from .pods import Pods
from .providers import REPO_ROOT
from .realimages import DraDriverImages

VALUES = REPO_ROOT / "e2e" / "realstack" / "dra-driver-values.yaml"
RELEASE = "nvidia-dra-driver"
LABELS = "dra-driver-nvidia-gpu-component=kubelet-plugin"


class DraDriver:
    def __init__(self, pods: Pods, helm: Helm, images: DraDriverImages) -> None:
        # pods: the driver's namespace, on the node under test
        self.pods = pods
        self.helm = helm
        self.images = images

    def deploy(self, gpus: int) -> None:
        """Install the chart; wait for its plugin and the node's slice of `gpus` devices."""
        repository, _, tag = self.images.image.rpartition(":")
        self.helm.run(
            "upgrade", "--install", RELEASE, str(self.images.chart),
            "--namespace", self.pods.namespace, "--create-namespace",
            "-f", str(VALUES),
            "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
            # within Helm.run's own deadline: a killed helm leaves the release pending
            "--wait", "--timeout", "150s",
        )  # fmt: skip
        self.pods.wait_ready(LABELS)
        wait_until(
            lambda: len(self.devices()) == gpus,
            90,
            f"the node's ResourceSlice to list {gpus} {DRIVER} devices",
            interval=0.5,
            diagnostics=self.pods.diagnostics,
        )

    def devices(self) -> dict[str, str]:
        """The node's devices of our driver: name -> its `uuid` attribute."""
        slices = self.pods.kubectl.get("resourceslices")["items"]
        return {
            device["name"]: device.get("attributes", {}).get("uuid", {}).get("string", "")
            for s in slices
            if s["spec"].get("driver") == DRIVER and s["spec"].get("nodeName") == self.pods.node
            for device in s["spec"].get("devices", [])
        }

    def plugin_pod(self) -> str:
        return self.pods.wait_ready(LABELS, timeout=90)

    def remove(self) -> None:
        """After the pods holding its claims: without the plugin the kubelet cannot
        unprepare them. Its slices go with the plugin."""
        self.helm.run(
            "uninstall", RELEASE, "--namespace", self.pods.namespace, "--wait",
            "--ignore-not-found",
        )  # fmt: skip
        self.pods.kubectl.delete(
            "resourceslices", "--field-selector", f"spec.driver={DRIVER}", wait=True
        )
        self.pods.kubectl.delete("namespace", self.pods.namespace, wait=True)

    def diagnostics(self) -> list[Section]:
        kubectl, ns = self.pods.kubectl, self.pods.namespace
        sections: list[Section] = [
            ("ResourceSlice devices", lambda: repr(self.devices())),
            ("ResourceClaims", lambda: kubectl.run("get", "resourceclaims", "-A", "-o", "wide")),
        ]
        for pod in self.pods.names(LABELS):
            sections.append(
                (
                    f"logs {ns}/{pod}",
                    lambda p=pod: kubectl.run("logs", "-n", ns, p, "--all-containers", "--tail=30"),
                )
            )
        return sections
