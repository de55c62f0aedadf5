"""The real stack on one node: NVIDIA's nvml-mock by its own chart, NVIDIA's device
plugin by upstream's manifest, allocwatch by its chart, and `nvidia-smi` as the reader.

Each is deployed as a user would deploy it. nvml-mock gets the values in
e2e/realstack/nvml-mock-values.yaml. The device plugin runs as upstream's
tests/e2e/device-plugin-mock.yaml runs it. allocwatch keeps the chart's
defaults; only the image is set. GPU pods, and a node view (a pod without GPUs,
which sees them all), run nvml-mock's image: it has the glibc nvidia-smi needs,
and nvml-mock's NRI plugin injects nvidia-smi, the mock library and the profile.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from allocwatch.durations import parse_duration
from allocwatch.profile import parse_profile
from devtools.waiting import wait_until

from .diagnostics import Section, report
from .expected import Expectation
from .helm import Helm
from .kubectl import Kubectl
from .nvidiaplugin import RESOURCE, NvidiaDevicePlugin
from .pods import Pods
from .providers import REPO_ROOT
from .realimages import RealImages
from .release import WATCHER_LABELS
from .smi import NvidiaSmi, SmiRow, expected_rows
from .teardown import run_all
from .workloads import GpuWorkloads

CHART = REPO_ROOT / "charts" / "allocwatch"
FILES = REPO_ROOT / "e2e" / "realstack"
NVML_MOCK_NS = "nvml-mock"
ALLOCWATCH_NS = "allocwatch"
PLUGIN_NS = "kube-system"
NVML_MOCK_LABELS = "app.kubernetes.io/name=nvml-mock,app.kubernetes.io/component=daemon"
GPU_LABEL = "nvidia.com/gpu.present"
NODE_VIEW = "node-view"
# where nvml-mock's NRI plugin mounts /var/lib/nvml-mock in every workload
OVERLAY = "/opt/nvml-mock/driver/config"


# nvml-mock's image has no Python: a shell that sleeps and leaves on SIGTERM
# (`sleep infinity` alone, as PID 1, would ignore it and hold its GPU for the
# grace period). No single quotes: make demo prints it inside them.
SLEEP = ["sh", "-c", 'trap "exit 0" TERM; sleep infinity & wait']


class RealStack:
    def __init__(
        self, kubectl: Kubectl, helm: Helm, images: RealImages, node: str, workload_ns: str
    ) -> None:
        self.kubectl, self.helm, self.images, self.node = kubectl, helm, images, node
        # the namespace of the GPU pods and the node view
        self.workload_ns = workload_ns
        self.pods = Pods(kubectl, workload_ns, node, self.diagnostics)
        self.workloads = GpuWorkloads(self.pods, images.nvml_mock, RESOURCE, command=SLEEP)
        self.nvml_mock = Pods(kubectl, NVML_MOCK_NS, node, self.diagnostics)
        self.plugin = NvidiaDevicePlugin(
            Pods(kubectl, PLUGIN_NS, node, self.diagnostics), images.device_plugin
        )
        self.watcher = Pods(kubectl, ALLOCWATCH_NS, node, self.diagnostics)
        self.smi = NvidiaSmi(kubectl)
        defaults = yaml.safe_load((CHART / "values.yaml").read_text())
        # the chart's defaults: what a user who sets nothing gets
        self.interval = parse_duration(defaults["interval"])
        self.fraction = float(defaults["usedFractionPerClaim"])
        self.expectation = Expectation([], self.fraction)
        self.allocwatch_installed = False
        # how many times the device plugin advertises each GPU (0: not deployed)
        self.plugin_replicas = 0

    # ------------------------------------------------------------ deploy
    def deploy(self) -> None:
        repository, _, tag = self.images.nvml_mock.rpartition(":")
        self.helm.run(
            "upgrade", "--install", "nvml-mock", str(self.images.nvml_mock_chart),
            "--namespace", NVML_MOCK_NS, "--create-namespace",
            "-f", str(FILES / "nvml-mock-values.yaml"), *self.nvml_mock_values(),
            "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
            "--wait", "--timeout", "180s",
        )  # fmt: skip
        wait_until(self._labelled, 60, f"{GPU_LABEL}=true on {self.node} (setup.sh)")
        self.kubectl.apply(
            json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.workload_ns}}
            )
        )
        self.start_pod(NODE_VIEW, gpus=0)
        profile = self.kubectl.exec(self.workload_ns, NODE_VIEW, ["cat", f"{OVERLAY}/config.yaml"])
        self.expectation = Expectation(parse_profile(profile), self.fraction)
        self.deploy_allocator()
        self.install_allocwatch()

    # What hands out the GPUs, and what nvml-mock's chart gets besides
    # nvml-mock-values.yaml: NVIDIA's device plugin and nothing here; the DRA
    # variant (realdra.py) replaces both.
    def nvml_mock_values(self) -> list[str]:
        return []

    def deploy_allocator(self) -> None:
        self.deploy_plugin(replicas=1)

    def remove_allocator(self) -> None:
        self.plugin.remove()

    def allocator_diagnostics(self) -> list[Section]:
        return self.plugin.diagnostics()

    def deploy_plugin(self, replicas: int) -> None:
        self.plugin.deploy(len(self.expectation.uuids), replicas)
        self.plugin_replicas = replicas

    def _labelled(self) -> bool:
        labels = self.kubectl.get("node", self.node)["metadata"].get("labels", {})
        return labels.get(GPU_LABEL) == "true"

    def install_allocwatch(self, values: Path | None = None) -> None:
        """The chart's defaults, and `values` over them when given."""
        repository, _, tag = self.images.allocwatch.rpartition(":")
        self.helm.run(
            "upgrade", "--install", "allocwatch", str(CHART),
            "--namespace", ALLOCWATCH_NS, "--create-namespace",
            *(["-f", str(values)] if values else []),
            "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
            "--wait", "--timeout", "120s",
        )  # fmt: skip
        self.allocwatch_installed = True

    def uninstall_allocwatch(self) -> None:
        self.helm.run("uninstall", "allocwatch", "--namespace", ALLOCWATCH_NS, "--wait")
        self.allocwatch_installed = False
        self.watcher.wait_gone(WATCHER_LABELS)

    # ------------------------------------------------------------ workloads
    def start_pod(self, name: str, gpus: int = 1, annotations: dict[str, str] | None = None) -> str:
        self.workloads.create(name, gpus, annotations)
        wait_until(lambda: self._ready(name), 90, f"pod {name} Ready", diagnostics=self.diagnostics)
        return name

    def _ready(self, name: str) -> bool:
        pod = self.kubectl.get("pod", name, "-n", self.workload_ns)
        conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
        return conditions.get("Ready") == "True"

    def restart_nvml_mock(self) -> None:
        """Delete nvml-mock's pod and wait for its replacement to be Ready: its preStop
        wipes the driver root and unlabels the node, its setup.sh lays both out again."""
        old = self.nvml_mock.wait_ready(NVML_MOCK_LABELS)
        self.kubectl.delete("pod", "-n", NVML_MOCK_NS, old, wait=True)
        new = self.nvml_mock.wait_ready(NVML_MOCK_LABELS, timeout=120)
        assert new != old, new

    def watcher_pod(self) -> dict[str, Any]:
        (pod,) = self.watcher.list(WATCHER_LABELS)
        return pod

    def delete_pods(self, names: Iterable[str]) -> None:
        """Delete the pods and wait until they are gone."""
        self.workloads.delete(*names)

    # ------------------------------------------------------------ readings
    def node_rows(self) -> list[SmiRow]:
        return self.smi.rows(self.workload_ns, NODE_VIEW)

    def expected(self, claims: dict[str, int] | None = None) -> list[SmiRow]:
        return expected_rows(self.expectation, claims or {})

    def wait_rows(self, claims: dict[str, int] | None, timeout: float, what: str) -> float:
        """Poll nvidia-smi in the node view until it shows `claims` (uuid -> count);
        the seconds until the poll that saw them started."""
        expected = self.expected(claims)
        start = time.monotonic()
        seen: list[float] = []

        def shows() -> bool:
            began = time.monotonic()
            if self.node_rows() == expected:
                seen.append(began - start)
                return True
            return False

        wait_until(shows, timeout, f"{what}: nvidia-smi {expected}", diagnostics=self.diagnostics)
        return seen[0]

    def overrides(self) -> Any:
        """nvml-mock's overrides document, as the mock library reads it."""
        text = self.kubectl.exec(
            self.workload_ns,
            NODE_VIEW,
            ["sh", "-c", f"cat {OVERLAY}/overrides.yaml 2>/dev/null || :"],
        )
        return yaml.safe_load(text) if text.strip() else None

    def ctl(self, *args: str) -> str:
        """nvml-mock-ctl in nvml-mock's own pod, as upstream's docs run it."""
        pod = self.nvml_mock.wait_ready(NVML_MOCK_LABELS, timeout=60)
        return self.kubectl.exec(NVML_MOCK_NS, pod, ["nvml-mock-ctl", *args], container="nvml-mock")

    # ------------------------------------------------------------ teardown
    def cleanup(self) -> None:
        """Best effort, in order: allocwatch, workloads, device plugin, nvml-mock."""
        steps = [
            lambda: self.helm.run("uninstall", "allocwatch", "-n", ALLOCWATCH_NS, "--wait",
                                  "--ignore-not-found"),
            lambda: self.kubectl.delete("namespace", self.workload_ns, ALLOCWATCH_NS, wait=True),
            self.remove_allocator,
            # its pod's exit removes what setup.sh laid out under /var/lib/nvml-mock
            lambda: self.helm.run("uninstall", "nvml-mock", "-n", NVML_MOCK_NS, "--wait",
                                  "--ignore-not-found"),
            lambda: self.kubectl.delete("namespace", NVML_MOCK_NS, wait=True),
            lambda: self.kubectl.run("label", "node", self.node, f"{GPU_LABEL}-"),
        ]  # fmt: skip
        run_all(steps)

    def diagnostics(self) -> str:
        def logs(pods: Pods, selector: str, tail: int = 30) -> list[Section]:
            return [
                (f"logs {pods.namespace}/{name}", lambda n=name: self._all_logs(pods, n, tail))
                for name in pods.names(selector)
            ]

        sections: list[Section] = [
            ("nvidia-smi (node view)", lambda: self.smi.table(self.workload_ns, NODE_VIEW)),
            ("overrides document", lambda: json.dumps(self.overrides(), indent=1)),
            ("pods", lambda: self.kubectl.run("get", "pods", "-A", "-o", "wide")),
        ]
        sections += logs(self.nvml_mock, "app.kubernetes.io/instance=nvml-mock")
        sections += self.allocator_diagnostics()
        sections += logs(self.watcher, WATCHER_LABELS)
        return report(sections)

    def _all_logs(self, pods: Pods, name: str, tail: int) -> str:
        return self.kubectl.run(
            "logs", "-n", pods.namespace, name, "--all-containers", f"--tail={tail}"
        )
