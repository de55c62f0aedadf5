"""Pods holding GPUs through ResourceClaims, and which GPUs their claims got.

The fake DRA plugin hands containers no CDI ids, so a pod sees nothing of its
GPU: the allocation is read from its ResourceClaim's status instead (with
NVIDIA's DRA driver too, whose device names are `gpu-<minor>`).
"""

from __future__ import annotations

from typing import Any

from devtools.waiting import WaitAbort, wait_until

from .draplugin import DRIVER
from .manifests import render
from .pods import Pods

# The pod's own name for its claim (fakedra-pod.yaml.j2).
POD_CLAIM = "gpus"
SLEEP = ["sleep", "3600"]


class DraWorkloads:
    def __init__(self, pods: Pods, image: str, command: list[str] | None = None) -> None:
        self.pods = pods
        self.image = image
        self.command = command or SLEEP

    def create_claim(
        self, name: str, uuid: str = "", template: bool = False, gpus: int = 1
    ) -> None:
        """A ResourceClaim (or ResourceClaimTemplate) for `gpus` GPUs; with `uuid`, the one
        GPU whose uuid attribute that is."""
        self.pods.kubectl.apply(
            render(
                "fakedra-claim.yaml.j2",
                name=name,
                namespace=self.pods.namespace,
                driver=DRIVER,
                gpus=gpus,
                uuid=uuid,
                as_template=template,
            )
        )

    def delete_claims(self, *names: str, templates: bool = False) -> None:
        if names:
            kind = "resourceclaimtemplate" if templates else "resourceclaim"
            self.pods.kubectl.delete(kind, *names, "-n", self.pods.namespace, wait=True)

    def create_pod(self, name: str, claim: str = "", claim_template: str = "") -> None:
        self.pods.kubectl.apply(
            render(
                "fakedra-pod.yaml.j2",
                name=name,
                namespace=self.pods.namespace,
                node=self.pods.node,
                image=self.image,
                command=self.command,
                claim=claim,
                claim_template=claim_template,
            )
        )

    def allocated_indices(self, pod_name: str, timeout: float = 120) -> list[int]:
        """Wait for the pod to run; the N of each `gpu-<N>` its claim was allocated."""
        return sorted(int(name.removeprefix("gpu-")) for name in self.allocated(pod_name, timeout))

    def allocated(self, pod_name: str, timeout: float = 120) -> list[str]:
        """Wait for the pod to run; the names of the devices its claim was allocated."""
        kubectl, ns = self.pods.kubectl, self.pods.namespace

        def read() -> list[str] | None:
            pod = kubectl.get("pod", pod_name, "-n", ns)
            phase = pod["status"].get("phase")
            if phase in ("Failed", "Succeeded"):
                raise WaitAbort(f"pod {pod_name} is {phase}: {pod['status']}")
            if phase != "Running":
                return None
            claim = kubectl.get("resourceclaim", _claim_of(pod), "-n", ns)
            results = claim.get("status", {}).get("allocation", {}).get("devices", {})
            return sorted(
                r["device"] for r in results.get("results", []) if r.get("driver") == DRIVER
            )

        return wait_until(
            read, timeout, f"pod {pod_name} to run with a GPU", diagnostics=self.pods.diagnostics
        )

    def claim_name(self, pod_name: str) -> str:
        """The name of the ResourceClaim the pod's `gpus` entry stands for."""
        kubectl, ns = self.pods.kubectl, self.pods.namespace
        return _claim_of(kubectl.get("pod", pod_name, "-n", ns))


def _claim_of(pod: dict[str, Any]) -> str:
    """A shared claim's own name, or the generated name of a template's claim
    (which the pod's status gives once the claim exists)."""
    generated = [
        s["resourceClaimName"]
        for s in pod["status"].get("resourceClaimStatuses", [])
        if s.get("name") == POD_CLAIM
    ]
    return (generated or [pod["spec"]["resourceClaims"][0].get("resourceClaimName")])[0]


class DraPods:
    """Names and creates a test's DRA pods and claims; its fixture deletes them."""

    def __init__(self, workloads: DraWorkloads, base: str) -> None:
        self.workloads = workloads
        self.base = base
        self.pods: list[str] = []
        self.claims: list[str] = []
        self.templates: list[str] = []

    def _next(self) -> str:
        return f"{self.base}-{len(self.pods)}"

    def with_template(self, gpus: int = 1) -> str:
        """A pod whose claim for `gpus` GPUs is made from a ResourceClaimTemplate (its
        own, generated)."""
        pod = self._next()
        self.workloads.create_claim(f"{pod}-gpu", template=True, gpus=gpus)
        self.templates.append(f"{pod}-gpu")
        self.workloads.create_pod(pod, claim_template=f"{pod}-gpu")
        self.pods.append(pod)
        return pod

    def claim(self, name: str, uuid: str = "") -> str:
        """A ResourceClaim for one GPU (that GPU, given its `uuid`), for pods to share."""
        self.workloads.create_claim(name, uuid=uuid)
        self.claims.append(name)
        return name

    def with_claim(self, claim: str) -> str:
        pod = self._next()
        self.workloads.create_pod(pod, claim=claim)
        self.pods.append(pod)
        return pod
