"""The fake DRA kubelet plugin on the node, and pods holding GPUs through ResourceClaims.

The plugin (`e2e/fakedra`, run from the fakeplugin image) publishes the
profile's GPUs as `gpu-<index>` devices of the driver `gpu.nvidia.com`; the
e2e profile gives no minor numbers, so the index is the number, for the
watcher as for the plugin. Which GPU a pod got is read from its claim's
allocation: the plugin hands containers no CDI ids, so they see nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .kubectl import Kubectl, KubectlError
from .manifests import render
from .stack import GPU_POD_LABELS, Stack
from .waiting import WaitAbort, wait_until

DRIVER = "gpu.nvidia.com"
DRA_PLUGIN_LABELS = "app.kubernetes.io/name=fakedra"
# The pods' own claim entry (fakedra-pod.yaml.j2).
POD_CLAIM = "gpus"
SLEEP = ["sleep", "3600"]


def api_server_of(kubectl: Kubectl) -> str:
    """`host:port` of the API server the kubeconfig names."""
    server = kubectl.run(
        "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"
    )
    return server.strip().removeprefix("https://").rstrip("/")


@dataclass
class DraPlugin:
    """The plugin's DaemonSet, and the claims and pods of a test module."""

    stack: Stack
    # `host:port` for clusters whose pods cannot reach the API server's Service
    api_server: str | None = None
    claims: list[str] = field(default_factory=list)

    @property
    def kubectl(self) -> Kubectl:
        return self.stack.kubectl

    @property
    def ns(self) -> str:
        return self.stack.ns

    def deploy(self, gpus: int) -> None:
        settings = self.stack.settings
        self.kubectl.apply(
            render(
                "fakedra.yaml.j2",
                namespace=self.ns,
                node=self.stack.node,
                image=self.stack.images.fakeplugin,
                nvml_mock_root=settings.nvml_mock_root,
                kubelet_root=settings.kubelet_root,
                args=[],
                api_server=self.api_server or "",
            )
        )
        try:
            self.kubectl.run(
                "rollout",
                "status",
                "daemonset/fakedra",
                "-n",
                self.ns,
                "--timeout=120s",
                timeout=130,
            )
        except KubectlError as exc:
            raise KubectlError(f"{exc}\n{self.diagnostics()}") from exc
        self.wait_slice(gpus, 90)

    def slice_devices(self) -> list[str]:
        """The device names of the node's ResourceSlices of our driver."""
        slices = self.kubectl.get("resourceslices")["items"]
        return sorted(
            device["name"]
            for s in slices
            if s["spec"].get("driver") == DRIVER and s["spec"].get("nodeName") == self.stack.node
            for device in s["spec"].get("devices", [])
        )

    def wait_slice(self, gpus: int, timeout: float) -> None:
        wanted = sorted(f"gpu-{i}" for i in range(gpus))
        wait_until(
            lambda: self.slice_devices() == wanted,
            timeout,
            f"the node's ResourceSlice to list {wanted}",
            interval=0.5,
            diagnostics=self.diagnostics,
        )

    def plugin_pod(self) -> str:
        return self.stack.wait_ready_pod(DRA_PLUGIN_LABELS, timeout=60)

    def registrations(self) -> int:
        logs = self.kubectl.logs(self.ns, self.plugin_pod())
        return logs.count(f"registered with the kubelet as {DRIVER}")

    # --- claims and pods -----------------------------------------------------

    def create_claim(self, name: str, uuid: str = "", template: bool = False) -> None:
        """A ResourceClaim (or ResourceClaimTemplate) for one GPU, that GPU if `uuid` is given."""
        self.kubectl.apply(
            render(
                "fakedra-claim.yaml.j2",
                name=name,
                namespace=self.ns,
                driver=DRIVER,
                gpus=1,
                uuid=uuid,
                as_template=template,
            )
        )
        self.claims.append(f"{'resourceclaimtemplate' if template else 'resourceclaim'}/{name}")

    def create_pod(self, name: str, claim: str = "", claim_template: str = "") -> None:
        self.kubectl.apply(
            render(
                "fakedra-pod.yaml.j2",
                name=name,
                namespace=self.ns,
                node=self.stack.node,
                image=self.stack.images.allocwatch,
                command=SLEEP,
                claim=claim,
                claim_template=claim_template,
            )
        )

    def allocated_indices(self, pod_name: str, timeout: float = 120) -> list[int]:
        """Wait for the pod to run; the GPU indices its claim was allocated."""

        def read() -> list[int] | None:
            pod = self.kubectl.get("pod", pod_name, "-n", self.ns)
            phase = pod["status"].get("phase")
            if phase in ("Failed", "Succeeded"):
                raise WaitAbort(f"pod {pod_name} is {phase}: {pod['status']}")
            if phase != "Running":
                return None
            statuses = pod["status"].get("resourceClaimStatuses", [])
            names = [s["resourceClaimName"] for s in statuses if s.get("name") == POD_CLAIM]
            source = pod["spec"]["resourceClaims"][0]
            name = names[0] if names else source.get("resourceClaimName")
            claim = self.kubectl.get("resourceclaim", name, "-n", self.ns)
            results = claim.get("status", {}).get("allocation", {}).get("devices", {})
            return sorted(
                int(r["device"].removeprefix("gpu-"))
                for r in results.get("results", [])
                if r.get("driver") == DRIVER
            )

        return wait_until(
            read, timeout, f"pod {pod_name} to run with a GPU", diagnostics=self.diagnostics
        )

    def delete_claims(self) -> None:
        if self.claims:
            self.kubectl.delete(*self.claims, "-n", self.ns, wait=True)
        self.claims.clear()

    # --- teardown and diagnostics ----------------------------------------------

    def remove(self) -> None:
        """Pods first: without the plugin the kubelet cannot unprepare their claims."""
        self.kubectl.delete("pods", "-n", self.ns, "-l", GPU_POD_LABELS, wait=True)
        self.delete_claims()
        self.kubectl.delete("daemonset", "fakedra", "-n", self.ns, wait=True)
        self.kubectl.delete("clusterrolebinding,clusterrole", f"fakedra-{self.ns}", wait=True)
        self.kubectl.delete(
            "resourceslices", "--field-selector", f"spec.driver={DRIVER}", wait=True
        )
        self.kubectl.delete("deviceclass", DRIVER, wait=True)
        self.kubectl.delete("serviceaccount", "fakedra", "-n", self.ns)

    def diagnostics(self) -> str:
        parts = [self.stack.diagnostics()]
        for title, produce in (
            ("ResourceSlice devices", lambda: json.dumps(self.slice_devices())),
            (
                "ResourceClaims",
                lambda: self.kubectl.run("get", "resourceclaims", "-n", self.ns, "-o", "wide"),
            ),
            ("DRA plugin logs", lambda: self.kubectl.logs(self.ns, self._pod(), tail=20)),
        ):
            try:
                body: Any = produce()
            except Exception as exc:  # diagnostics must never hide the real failure
                body = f"<unavailable: {type(exc).__name__}: {exc}>"
            parts.append(f"--- {title} ---\n{str(body).rstrip()}")
        return "\n".join(parts)

    def _pod(self) -> str:
        pods = self.stack.pods(DRA_PLUGIN_LABELS)
        if not pods:
            raise LookupError("no DRA plugin pod")
        return str(pods[0]["metadata"]["name"])
