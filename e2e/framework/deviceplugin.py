"""The fake device plugin's DaemonSet, and what the node advertises because of it."""

from __future__ import annotations

from devtools.waiting import wait_until

from .diagnostics import Section
from .manifests import render
from .pods import Pods

NAME = "fakeplugin"
LABELS = f"app.kubernetes.io/name={NAME}"
RESOURCE = "nvidia.com/gpu"


class FakeDevicePlugin:
    def __init__(self, pods: Pods, image: str, nvml_mock_root: str, kubelet_root: str) -> None:
        self.pods = pods
        self.image = image
        self.nvml_mock_root = nvml_mock_root
        self.plugin_dir = f"{kubelet_root}/device-plugins"
        # the arguments of the running rollout; None while unknown
        self.args: list[str] | None = None

    def allocatable(self) -> int:
        node = self.pods.kubectl.get("node", self.pods.node)
        return int(node["status"].get("allocatable", {}).get(RESOURCE, "0"))

    def capacity(self) -> int:
        node = self.pods.kubectl.get("node", self.pods.node)
        return int(node["status"].get("capacity", {}).get(RESOURCE, "0"))

    def deploy(self, args: list[str], allocatable: int, capacity: int) -> None:
        """Run the plugin with `args`; wait until the node advertises what it should."""
        if args != self.args:
            self.args = None  # unknown until the rollout completes
            ns = self.pods.namespace
            self.pods.kubectl.apply(
                render(
                    "fakeplugin.yaml.j2",
                    namespace=ns,
                    node=self.pods.node,
                    image=self.image,
                    nvml_mock_root=self.nvml_mock_root,
                    plugin_dir=self.plugin_dir,
                    args=args,
                )
            )
            self.pods.wait_rollout(NAME, LABELS)
            self.args = list(args)
        wait_until(
            lambda: (self.allocatable(), self.capacity()) == (allocatable, capacity),
            90,
            f"node {self.pods.node} to advertise {RESOURCE} allocatable={allocatable} "
            f"capacity={capacity}",
            interval=0.5,
            diagnostics=self.pods.diagnostics,
        )

    def only(self, uuids: list[str], shared: str, replicas: int) -> None:
        """`shared` advertised `replicas` times, every other GPU unhealthy: every GPU pod
        lands on it."""
        args = ["--replicas", str(replicas)]
        for uuid in uuids:
            if uuid != shared:
                args += ["--unhealthy", uuid]
        self.deploy(args, allocatable=replicas, capacity=replicas * len(uuids))

    def pod(self) -> str:
        return self.pods.wait_ready(LABELS, timeout=60)

    def registrations(self) -> int:
        return self.pods.kubectl.logs(self.pods.namespace, self.pod()).count(
            f"registered {RESOURCE} "
        )

    def remove(self) -> None:
        self.pods.kubectl.delete("daemonset", NAME, "-n", self.pods.namespace, wait=True)
        self.args = None

    def diagnostics(self) -> list[Section]:
        sections: list[Section] = [
            (
                f"node {self.pods.node} {RESOURCE}",
                lambda: f"allocatable={self.allocatable()} capacity={self.capacity()}",
            )
        ]
        for pod in self.pods.names(LABELS):
            sections.append(
                (
                    f"plugin logs {pod}",
                    lambda p=pod: self.pods.kubectl.logs(self.pods.namespace, p, tail=15),
                )
            )
        return sections
