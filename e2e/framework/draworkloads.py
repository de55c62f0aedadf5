"""Pods holding GPUs through ResourceClaims, and which GPUs their claims got.

The fake DRA plugin hands containers no CDI ids, so a pod sees nothing of its
GPU: the allocation is read from its ResourceClaim's status instead.
"""

from __future__ import annotations

from devtools.waiting import WaitAbort, wait_until

from .draplugin import DRIVER
from .manifests import render
from .pods import Pods

# The pod's own name for its claim (fakedra-pod.yaml.j2).
POD_CLAIM = "gpus"
SLEEP = ["sleep", "3600"]


class DraWorkloads:
    def __init__(self, pods: Pods, image: str) -> None:
        self.pods = pods
        self.image = image

    def create_claim(self, name: str, uuid: str = "", template: bool = False) -> None:
        """A ResourceClaim (or ResourceClaimTemplate) for one GPU, that GPU if `uuid` is given."""
        self.pods.kubectl.apply(
            render(
                "fakedra-claim.yaml.j2",
                name=name,
                namespace=self.pods.namespace,
                driver=DRIVER,
                gpus=1,
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
                command=SLEEP,
                claim=claim,
                claim_template=claim_template,
            )
        )

    def allocated_indices(self, pod_name: str, timeout: float = 120) -> list[int]:
        """Wait for the pod to run; the GPU indices its claim was allocated."""
        kubectl, ns = self.pods.kubectl, self.pods.namespace

        def read() -> list[int] | None:
            pod = kubectl.get("pod", pod_name, "-n", ns)
            phase = pod["status"].get("phase")
            if phase in ("Failed", "Succeeded"):
                raise WaitAbort(f"pod {pod_name} is {phase}: {pod['status']}")
            if phase != "Running":
                return None
            # a template's claim has a generated name, found in the pod's status
            generated = [
                s["resourceClaimName"]
                for s in pod["status"].get("resourceClaimStatuses", [])
                if s.get("name") == POD_CLAIM
            ]
            named = pod["spec"]["resourceClaims"][0].get("resourceClaimName")
            claim = kubectl.get("resourceclaim", (generated or [named])[0], "-n", ns)
            results = claim.get("status", {}).get("allocation", {}).get("devices", {})
            return sorted(
                int(r["device"].removeprefix("gpu-"))
                for r in results.get("results", [])
                if r.get("driver") == DRIVER
            )

        return wait_until(
            read, timeout, f"pod {pod_name} to run with a GPU", diagnostics=self.pods.diagnostics
        )
