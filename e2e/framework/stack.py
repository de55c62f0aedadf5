"""The system under test on one node: nvml-mock's files, the fake plugin, the chart.

Everything lives in one namespace and is pinned to one node. The overrides
document is read through the watcher pod, so the same code works on every
provider; when no watcher runs (after `helm uninstall`) the node helper reads it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from allocwatch.durations import parse_duration
from allocwatch.profile import Device, parse_profile

from . import timings
from .expected import Readings, engine_problems, memory_readings, without_readings
from .helm import Helm
from .kubectl import Kubectl, KubectlError
from .manifests import render
from .providers import REPO_ROOT, Images
from .waiting import WaitAbort, wait_until

NODE_SCRIPTS = Path(__file__).resolve().parent / "node_scripts"
CHART = REPO_ROOT / "charts" / "allocwatch"
# Written beside the config.yaml the node helper stages: what unstage may remove.
STAGE_MARKER = ".allocwatch-e2e-staged"
RELEASE = "allocwatch"
WATCHER_LABELS = f"app.kubernetes.io/name=allocwatch,app.kubernetes.io/instance={RELEASE}"
PLUGIN_LABELS = "app.kubernetes.io/name=fakeplugin"
HELPER_LABELS = "app.kubernetes.io/name=node-helper"
GPU_POD_LABELS = "app.kubernetes.io/name=gpu-pod"
RESOURCE = "nvidia.com/gpu"
DEFAULT_PLUGIN_ARGS: list[str] = []

# gpu_pods(gpus=1) -> pod name (the fixture in conftest.py).
GpuPods = Callable[..., str]


# Prints whether another process holds the flock on argv[1].
LOCK_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("true")
else:
    print("false")
"""


def script(name: str) -> str:
    return (NODE_SCRIPTS / f"{name}.py").read_text()


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

    @property
    def overrides_path(self) -> str:
        return f"{self.nvml_mock_root}/driver/config/overrides.yaml"

    @property
    def config_path(self) -> str:
        return f"{self.nvml_mock_root}/driver/config/config.yaml"


@dataclass
class Stack:
    kubectl: Kubectl
    helm: Helm
    images: Images
    node: str
    workdir: Path
    settings: Settings = field(default_factory=Settings)
    plugin_args: list[str] | None = None
    chart_installed: bool = False
    _reader: str | None = None

    @property
    def ns(self) -> str:
        return self.settings.namespace

    # --- pods -------------------------------------------------------------

    def pods(self, selector: str) -> list[dict[str, Any]]:
        items = self.kubectl.get("pods", "-n", self.ns, "-l", selector)["items"]
        return [p for p in items if p["spec"].get("nodeName") == self.node]

    def ready_pod(self, selector: str) -> str | None:
        for pod in self.pods(selector):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
            if conditions.get("Ready") == "True":
                return str(pod["metadata"]["name"])
        return None

    def wait_ready_pod(self, selector: str, timeout: float = 120) -> str:
        return wait_until(
            lambda: self.ready_pod(selector),
            timeout,
            f"a Ready pod {selector} on {self.node}",
            diagnostics=self.diagnostics,
        )

    def python(self, pod: str, source: str, *args: str, timeout: float = 30) -> Any:
        out = self.kubectl.exec(self.ns, pod, ["python3", "-c", source, *args], timeout=timeout)
        return json.loads(out.strip().splitlines()[-1])

    # --- nvml-mock's files, through the node helper -----------------------

    def deploy_helper(self) -> None:
        self.kubectl.apply(render("namespace.yaml.j2", namespace=self.ns))
        # GPU pods left by an interrupted run would hold devices.
        self.kubectl.delete("pods", "-n", self.ns, "-l", GPU_POD_LABELS, wait=True)
        profile = self.settings.profile.read_text() if self.settings.stage else ""
        self.kubectl.apply(
            render(
                "node-helper.yaml.j2",
                namespace=self.ns,
                node=self.node,
                image=self.images.allocwatch,
                stage=self.settings.stage,
                profile=profile,
                nvml_mock_root=self.settings.nvml_mock_root,
                marker=STAGE_MARKER,
            )
        )
        self.wait_ready_pod(HELPER_LABELS)

    def helper(self) -> str:
        return self.wait_ready_pod(HELPER_LABELS, timeout=60)

    def node_devices(self) -> list[Device]:
        """The profile the node's nvml-mock serves (ours when staged)."""
        text = self.kubectl.exec(self.ns, self.helper(), ["cat", self.settings.config_path])
        return parse_profile(text)

    def patch_overrides(self, patch: dict[str, Any]) -> Any:
        """Deep-merge `patch` (a null deletes its key) under nvml-mock's lock."""
        return self._change_overrides({"merge": patch})

    def _change_overrides(self, change: dict[str, Any]) -> Any:
        return self.python(
            self.helper(),
            script("patch_overrides"),
            self.settings.overrides_path,
            json.dumps(change),
        )["doc"]

    @contextlib.contextmanager
    def foreign_keys_restored(self, published: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Yields the document less our readings (of devices `published`, "<index>");
        puts exactly that back afterwards.

        On a node running a real nvml-mock (`--nvml-mock=installed`) the file
        may hold someone's own overrides, which a test's keys must neither
        replace for good nor be compared without. The readings present at
        the end are kept: the watcher may still be publishing them.
        """
        exists, doc = self.read_document(through_helper=True)
        found = without_readings(doc if exists else None, published)
        try:
            yield found
        finally:
            self._change_overrides({"replace": found})

    @contextlib.contextmanager
    def holding_lock(self, patch_on_release: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """nvml-mock's lock, held by the node helper for the block; then it writes a patch.

        Yields a dict that receives the helper's report once released:
        {"changed_while_held": bool, "held_for": seconds, "doc": ...}.
        """
        helper = self.helper()
        release = f"/tmp/allocwatch-e2e-release-{uuid.uuid4().hex}"
        report: dict[str, Any] = {}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            holding = pool.submit(
                self.python,
                helper,
                script("patch_overrides"),
                self.settings.overrides_path,
                json.dumps({"merge": patch_on_release}),
                release,
                "120",
                timeout=150,
            )
            try:
                wait_until(
                    lambda: holding.done() or self.lock_held(),
                    30,
                    "the node helper to take nvml-mock's lock",
                    diagnostics=self.diagnostics,
                )
                yield report
            finally:
                self.kubectl.exec(self.ns, helper, ["touch", release])
                report.update(holding.result(timeout=60))

    def lock_held(self) -> bool:
        return bool(self.python(self.helper(), LOCK_PROBE, f"{self.settings.overrides_path}.lock"))

    def watcher_metric(self, pod: str, sample: str) -> float:
        """One sample of the watcher's /metrics, read inside its pod."""
        port = str(self.settings.metrics_port)
        return float(self.python(pod, script("watcher_metric"), port, sample))

    def lock_file_exists(self) -> bool:
        lock = f"{self.settings.overrides_path}.lock"
        found = self.kubectl.exec(
            self.ns, self.helper(), ["sh", "-c", f"[ -f {lock} ] && echo y || echo n"]
        )
        return found.strip() == "y"

    def remove_overrides_and_time_restore(self, timeout: float) -> tuple[float | None, Any]:
        result = self.python(
            self.helper(),
            script("remove_overrides"),
            self.settings.overrides_path,
            str(timeout),
            timeout=timeout + 30,
        )
        return result["restored_after"], result["doc"]

    def unstage(self) -> None:
        """Remove the files staging created (only when the helper's marker says we did)."""
        if self.settings.stage:
            config = f"{self.settings.nvml_mock_root}/driver/config"
            marker = f"{config}/{STAGE_MARKER}"
            files = " ".join(
                f"{config}/{f}" for f in ("config.yaml", "overrides.yaml", "overrides.yaml.lock")
            )
            driver = f"{self.settings.nvml_mock_root}/driver"
            self.kubectl.exec(
                self.ns,
                self.helper(),
                [
                    "sh",
                    "-c",
                    f"[ -e {marker} ] || exit 0; rm -f {files} {marker}; "
                    f"rmdir {config} {driver} 2>/dev/null; true",
                ],
            )

    # --- the fake device plugin ------------------------------------------

    def allocatable(self) -> int:
        node = self.kubectl.get("node", self.node)
        return int(node["status"].get("allocatable", {}).get(RESOURCE, "0"))

    def capacity(self) -> int:
        node = self.kubectl.get("node", self.node)
        return int(node["status"].get("capacity", {}).get(RESOURCE, "0"))

    def deploy_plugin(self, args: list[str], allocatable: int, capacity: int) -> None:
        """Run the plugin with `args`; wait until the node advertises what it should."""
        if args != self.plugin_args:
            self.plugin_args = None  # unknown until the rollout completes
            self.kubectl.apply(
                render(
                    "fakeplugin.yaml.j2",
                    namespace=self.ns,
                    node=self.node,
                    image=self.images.fakeplugin,
                    nvml_mock_root=self.settings.nvml_mock_root,
                    plugin_dir=f"{self.settings.kubelet_root}/device-plugins",
                    args=args,
                )
            )
            try:
                self.kubectl.run(
                    "rollout",
                    "status",
                    "daemonset/fakeplugin",
                    "-n",
                    self.ns,
                    "--timeout=120s",
                    timeout=130,
                )
            except KubectlError as exc:
                raise KubectlError(f"{exc}\n{self.diagnostics()}") from exc
            self.plugin_args = list(args)
        wait_until(
            lambda: (self.allocatable(), self.capacity()) == (allocatable, capacity),
            90,
            f"node {self.node} to advertise {RESOURCE} allocatable={allocatable} "
            f"capacity={capacity}",
            interval=0.5,
            diagnostics=self.diagnostics,
        )

    def plugin_pod(self) -> str:
        return self.wait_ready_pod(PLUGIN_LABELS, timeout=60)

    def plugin_registrations(self) -> int:
        return self.kubectl.logs(self.ns, self.plugin_pod()).count(f"registered {RESOURCE} ")

    # --- the chart ----------------------------------------------------------

    def install_chart(self) -> None:
        repository, tag = split_image(self.images.allocwatch)
        values = self.workdir / "values.yaml"
        values.write_text(
            render(
                "values.yaml.j2",
                repository=repository,
                tag=tag,
                interval=self.settings.interval,
                fraction=self.settings.fraction,
                metrics_port=self.settings.metrics_port,
                pod_resources_socket=f"{self.settings.kubelet_root}/pod-resources/kubelet.sock",
                nvml_mock_root=self.settings.nvml_mock_root,
                node=self.node,
            )
        )
        self.helm.upgrade_install(RELEASE, CHART, self.ns, values)
        self.chart_installed = True
        self.watcher_pod()

    def ensure_chart(self) -> None:
        if not self.chart_installed:
            self.install_chart()

    def uninstall_chart(self) -> None:
        """Uninstall, and wait until no watcher runs (one could still write the file)."""
        self.helm.uninstall(RELEASE, self.ns)
        self.chart_installed = False
        self._reader = None
        self.wait_pods_gone(WATCHER_LABELS)

    def wait_pods_gone(self, selector: str, timeout: float = 60) -> None:
        wait_until(
            lambda: not self.pods(selector),
            timeout,
            f"pods {selector} to be gone",
            diagnostics=self.diagnostics,
        )

    def watcher_pod(self, timeout: float = 120) -> str:
        return self.wait_ready_pod(WATCHER_LABELS, timeout)

    # --- the document --------------------------------------------------------

    def read_document(self, through_helper: bool = False) -> tuple[bool, Any]:
        """(exists, parsed overrides.yaml), read in the watcher pod (or the helper)."""
        if through_helper:
            pod = self.helper()
        else:
            # The pod name is cached between polls; a failed exec forgets it.
            pod = self._reader = self._reader or self.watcher_pod(timeout=30)
        try:
            result = self.python(pod, script("read_overrides"), self.settings.overrides_path)
        except KubectlError:
            self._reader = None
            raise
        if result["exists"]:
            problems = engine_problems(result["doc"], result["mode"])
            assert not problems, f"overrides.yaml as the engine would read it: {problems}"
        return bool(result["exists"]), result["doc"]

    def readings(self) -> Readings | None:
        return memory_readings(self.read_document()[1])

    def wait_readings(self, expected: Readings, timeout: float, what: str) -> Readings:
        """Poll the document until its memory readings equal `expected` (exactly)."""
        start = time.monotonic()

        def matches() -> Readings | None:
            current = self.readings()
            return current if current == expected else None

        readings = wait_until(
            matches, timeout, f"{what}: readings {expected}", diagnostics=self.diagnostics
        )
        timings.note(what, time.monotonic() - start)
        return readings

    # --- GPU pods --------------------------------------------------------------

    def create_gpu_pod(self, name: str, gpus: int = 1) -> None:
        self.kubectl.apply(
            render(
                "gpu-pod.yaml.j2",
                name=name,
                namespace=self.ns,
                node=self.node,
                image=self.images.allocwatch,
                resource_name=RESOURCE,
                gpus=gpus,
            )
        )

    def visible_devices(self, name: str, timeout: float = 120) -> list[str]:
        """Wait for the pod to run and return the UUIDs in its NVIDIA_VISIBLE_DEVICES."""

        def read() -> list[str] | None:
            pod = self.kubectl.get("pod", name, "-n", self.ns)
            phase = pod["status"].get("phase")
            if phase in ("Failed", "Succeeded"):
                raise WaitAbort(f"pod {name} is {phase}: {pod['status']}")
            if phase != "Running":
                return None
            for line in self.kubectl.logs(self.ns, name).splitlines():
                if line.startswith("NVIDIA_VISIBLE_DEVICES="):
                    value = line.partition("=")[2]
                    return value.split(",") if value else []
            return None

        return wait_until(
            read,
            timeout,
            f"pod {name} to run and print NVIDIA_VISIBLE_DEVICES",
            diagnostics=self.diagnostics,
        )

    def delete_gpu_pods(self, *names: str, timeout: float = 60) -> None:
        """Delete the pods and wait until they are gone (not merely terminating)."""
        if not names:
            return
        self.kubectl.delete("pod", "-n", self.ns, *names)

        def gone() -> bool:
            items = self.kubectl.get("pods", "-n", self.ns, "-l", GPU_POD_LABELS)["items"]
            return not {p["metadata"]["name"] for p in items} & set(names)

        wait_until(
            gone, timeout, f"pods {', '.join(names)} to be gone", diagnostics=self.diagnostics
        )

    # --- teardown ------------------------------------------------------------

    def cleanup(self) -> None:
        """Best effort, in order: chart, plugin, staged files, namespace."""
        steps = [
            self.uninstall_chart,
            lambda: self.kubectl.delete("daemonset", "fakeplugin", "-n", self.ns, wait=True),
            self.unstage,
            lambda: self.kubectl.delete("namespace", self.ns, wait=True),
        ]
        errors = []
        for step in steps:
            try:
                step()
            except Exception as exc:  # keep cleaning; report at the end
                errors.append(f"{type(exc).__name__}: {exc}")
        if errors:
            raise RuntimeError("cleanup failed:\n" + "\n".join(errors))

    # --- diagnostics -------------------------------------------------------------

    def diagnostics(self) -> str:
        parts: list[str] = []

        def section(title: str, produce: Any) -> None:
            try:
                body = produce()
            except Exception as exc:  # diagnostics must never hide the real failure
                body = f"<unavailable: {type(exc).__name__}: {exc}>"
            parts.append(f"--- {title} ---\n{str(body).rstrip()}")

        section("overrides document", lambda: json.dumps(self._document_anyhow(), indent=1))
        section(
            f"pods in {self.ns}",
            lambda: self.kubectl.run("get", "pods", "-n", self.ns, "-o", "wide"),
        )
        section(
            f"node {self.node} {RESOURCE}",
            lambda: f"allocatable={self.allocatable()} capacity={self.capacity()}",
        )
        for pod in self._pod_names(WATCHER_LABELS):
            section(f"watcher logs {pod}", lambda p=pod: self.kubectl.logs(self.ns, p, tail=30))
        for pod in self._pod_names(PLUGIN_LABELS):
            section(f"plugin logs {pod}", lambda p=pod: self.kubectl.logs(self.ns, p, tail=15))
        return "\n".join(parts)

    def _document_anyhow(self) -> Any:
        for through_helper in (False, True):
            pods = self._pod_names(HELPER_LABELS if through_helper else WATCHER_LABELS)
            for pod in pods:
                try:
                    return self.python(
                        pod, script("read_overrides"), self.settings.overrides_path, timeout=10
                    )
                except KubectlError:
                    continue
        return "<no pod to read it through>"

    def _pod_names(self, selector: str) -> list[str]:
        try:
            return [p["metadata"]["name"] for p in self.pods(selector)]
        except KubectlError:
            return []
