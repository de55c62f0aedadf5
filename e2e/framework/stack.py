"""The fake stack on one node: nvml-mock's files staged by the node helper, the fake
device plugin, and allocwatch by its chart.

Everything lives in one namespace and is pinned to one node. Each part does one
job (pods.py, nodefiles.py, deviceplugin.py, release.py, workloads.py); this
module only chooses the settings, puts the parts together, and takes them down.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from allocwatch.durations import parse_duration

from .deviceplugin import FakeDevicePlugin
from .diagnostics import Section, report
from .draplugin import FakeDraPlugin
from .draworkloads import DraWorkloads
from .helm import Helm
from .kubectl import Kubectl
from .manifests import render
from .nodefiles import HELPER_LABELS, NodeFiles
from .pods import Pods
from .providers import REPO_ROOT, Images
from .release import WATCHER_LABELS, AllocwatchRelease
from .teardown import run_all
from .workloads import GpuWorkloads

RESOURCE = "nvidia.com/gpu"
DEFAULT_PLUGIN_ARGS: list[str] = []

# gpu_pods(gpus=1) -> pod name (the fixture in conftest.py).
GpuPods = Callable[..., str]


def split_image(ref: str) -> tuple[str, str]:
    """`host:5000/repo:tag` -> (`host:5000/repo`, `tag`)."""
    if "@" in ref:
        raise ValueError(f"{ref}: digest references are not supported here")
    repository, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repository, tag


@dataclass
class Settings:
    namespace: str = "allocwatch-e2e"
    # not the chart's or the CLI's default, so a flag that never reaches the
    # watcher shows (test 6 reads the interval it logs)
    interval: str = "700ms"
    fraction: float = 0.75
    metrics_port: int = 9477
    nvml_mock_root: str = "/var/lib/nvml-mock"
    kubelet_root: str = "/var/lib/kubelet"
    stage: bool = True
    profile: Path = REPO_ROOT / "e2e" / "profiles" / "four-gpus.yaml"

    @property
    def interval_seconds(self) -> float:
        return parse_duration(self.interval)


class Stack:
    def __init__(
        self,
        kubectl: Kubectl,
        helm: Helm,
        images: Images,
        node: str,
        workdir: Path,
        settings: Settings | None = None,
    ) -> None:
        self.kubectl = kubectl
        self.node = node
        self.settings = s = settings or Settings()
        self.pods = Pods(kubectl, s.namespace, node, self.diagnostics)
        self.files = NodeFiles(
            self.pods, images.allocwatch, s.nvml_mock_root, s.profile if s.stage else None
        )
        self.plugin = FakeDevicePlugin(
            self.pods, images.fakeplugin, s.nvml_mock_root, s.kubelet_root
        )
        repository, tag = split_image(images.allocwatch)
        values = workdir / "values.yaml"
        values.write_text(
            render(
                "values.yaml.j2",
                repository=repository,
                tag=tag,
                interval=s.interval,
                fraction=s.fraction,
                metrics_port=s.metrics_port,
                pod_resources_socket=f"{s.kubelet_root}/pod-resources/kubelet.sock",
                nvml_mock_root=s.nvml_mock_root,
                node=node,
            )
        )
        self.watcher = AllocwatchRelease(self.pods, helm, self.files, values, s.metrics_port)
        self.workloads = GpuWorkloads(self.pods, images.allocwatch, RESOURCE)
        # deployed only by the DRA tests
        self.dra = FakeDraPlugin(self.pods, images.fakeplugin, s.nvml_mock_root, s.kubelet_root)
        self.dra_workloads = DraWorkloads(self.pods, images.allocwatch)

    @property
    def ns(self) -> str:
        return self.settings.namespace

    def deploy(self) -> None:
        """Namespace, node helper, plugin advertising every GPU of the profile, chart."""
        self.kubectl.apply(render("namespace.yaml.j2", namespace=self.ns))
        self.workloads.delete_all()
        self.files.deploy()
        gpus = len([d for d in self.files.devices() if d.uuid])
        self.plugin.deploy(DEFAULT_PLUGIN_ARGS, allocatable=gpus, capacity=gpus)
        self.watcher.install()

    def cleanup(self) -> None:
        """Best effort, in order: DRA plugin, chart, plugin, staged files, namespace."""
        steps = [
            *([self.dra.remove] if self.dra.deployed else []),
            self.watcher.uninstall,
            self.plugin.remove,
            self.files.unstage,
            lambda: self.kubectl.delete("namespace", self.ns, wait=True),
        ]
        run_all(steps)

    def diagnostics(self) -> str:
        sections: list[Section] = [
            ("overrides document", lambda: json.dumps(self._document_anyhow(), indent=1)),
            (
                f"pods in {self.ns}",
                lambda: self.kubectl.run("get", "pods", "-n", self.ns, "-o", "wide"),
            ),
        ]
        sections += self.plugin.diagnostics()
        if self.dra.deployed:
            sections += self.dra.diagnostics()
        sections += self.watcher.diagnostics()
        return report(sections)

    def _document_anyhow(self) -> object:
        for selector in (WATCHER_LABELS, HELPER_LABELS):
            for pod in self.pods.names(selector):
                try:
                    return self.files.read_raw(pod)
                except Exception:  # another pod may still answer
                    continue
        return "<no pod to read it through>"
