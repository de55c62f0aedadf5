"""GPU pods: ask for devices, report which ones they got, go away."""

from __future__ import annotations

from devtools.waiting import WaitAbort, wait_until

from .manifests import render
from .pods import Pods

GPU_POD_LABELS = "app.kubernetes.io/name=gpu-pod"


class GpuWorkloads:
    def __init__(
        self, pods: Pods, image: str, resource: str, command: list[str] | None = None
    ) -> None:
        self.pods = pods
        self.image = image
        self.resource = resource
        # the pods' command; None: the template's, which prints NVIDIA_VISIBLE_DEVICES
        self.command = command

    def create(self, name: str, gpus: int = 1, annotations: dict[str, str] | None = None) -> None:
        self.pods.kubectl.apply(
            render(
                "gpu-pod.yaml.j2",
                name=name,
                namespace=self.pods.namespace,
                node=self.pods.node,
                image=self.image,
                resource_name=self.resource,
                gpus=gpus,
                command=self.command,
                annotations=annotations,
            )
        )

    def annotate(self, name: str, key: str, value: str) -> None:
        self.pods.kubectl.run("annotate", "-n", self.pods.namespace, f"pod/{name}",
                              f"{key}={value}", "--overwrite")  # fmt: skip

    def visible_devices(self, name: str, timeout: float = 120) -> list[str]:
        """Wait for the pod to run and return the UUIDs in its NVIDIA_VISIBLE_DEVICES."""
        kubectl, ns = self.pods.kubectl, self.pods.namespace

        def read() -> list[str] | None:
            pod = kubectl.get("pod", name, "-n", ns)
            phase = pod["status"].get("phase")
            if phase in ("Failed", "Succeeded"):
                raise WaitAbort(f"pod {name} is {phase}: {pod['status']}")
            if phase != "Running":
                return None
            for line in kubectl.logs(ns, name).splitlines():
                if line.startswith("NVIDIA_VISIBLE_DEVICES="):
                    value = line.partition("=")[2]
                    return value.split(",") if value else []
            return None

        return wait_until(
            read,
            timeout,
            f"pod {name} to run and print NVIDIA_VISIBLE_DEVICES",
            diagnostics=self.pods.diagnostics,
        )

    def delete(self, *names: str, timeout: float = 60) -> None:
        """Delete the pods and wait until they are gone (not merely terminating)."""
        if not names:
            return
        kubectl, ns = self.pods.kubectl, self.pods.namespace
        kubectl.delete("pod", "-n", ns, *names)

        def gone() -> bool:
            items = kubectl.get("pods", "-n", ns, "-l", GPU_POD_LABELS)["items"]
            return not {p["metadata"]["name"] for p in items} & set(names)

        wait_until(
            gone, timeout, f"pods {', '.join(names)} to be gone", diagnostics=self.pods.diagnostics
        )

    def delete_all(self) -> None:
        """GPU pods left by an interrupted run would hold devices."""
        self.pods.kubectl.delete("pods", "-n", self.pods.namespace, "-l", GPU_POD_LABELS, wait=True)
