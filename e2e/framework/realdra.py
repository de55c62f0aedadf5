"""The real stack's DRA variant: NVIDIA's DRA driver by its chart hands out the GPUs.

nvml-mock and allocwatch are deployed as in realstack.py; NVIDIA's device
plugin is not (both would hand out the same GPUs). nvml-mock's profile is its
own t4 with every minor number moved one up (the last to 0), so each GPU's DRA
name `gpu-<minor>` differs from its index: a watcher that mapped DRA devices by
index would raise the wrong GPU, and the suite would see it. GPU pods claim
devices through ResourceClaims (draworkloads.py) and run nvml-mock's image.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .diagnostics import Section
from .dradriver import DraDriver
from .draworkloads import DraWorkloads
from .helm import Helm
from .kubectl import Kubectl
from .pods import Pods
from .realimages import DraDriverImages, RealImages
from .realstack import FILES, SLEEP, RealStack

DRIVER_NS = "nvidia"
MINOR = re.compile(r"^(\s*minor_number:\s*)(\d+)(.*)$", re.MULTILINE)


def rotated_minors(profile: str) -> str:
    """`profile` with each device's minor number N made (N + 1) mod the device count.

    A shipped profile gives every device its index as minor number, in index
    order; anything else is refused rather than rotated into an unknown shape.
    """
    minors = [int(m.group(2)) for m in MINOR.finditer(profile)]
    if not minors or minors != list(range(len(minors))):
        raise ValueError(f"expected minor numbers 0..N-1 in order, found {minors}")
    return MINOR.sub(
        lambda m: f"{m.group(1)}{(int(m.group(2)) + 1) % len(minors)}{m.group(3)}", profile
    )


class RealDraStack(RealStack):
    def __init__(
        self,
        kubectl: Kubectl,
        helm: Helm,
        images: RealImages,
        driver_images: DraDriverImages,
        node: str,
        workload_ns: str,
        workdir: Path,
    ) -> None:
        super().__init__(kubectl, helm, images, node, workload_ns)
        self.driver = DraDriver(
            Pods(kubectl, DRIVER_NS, node, self.diagnostics), helm, driver_images
        )
        self.claims = DraWorkloads(self.pods, images.nvml_mock, command=SLEEP)
        self.workdir = workdir

    def nvml_mock_values(self) -> list[str]:
        values = yaml.safe_load((FILES / "nvml-mock-values.yaml").read_text())
        shipped = self.images.nvml_mock_chart / "profiles" / f"{values['gpu']['profile']}.yaml"
        profile = self.workdir / "rotated-minors.yaml"
        profile.write_text(rotated_minors(shipped.read_text()))
        return ["--set-file", f"gpu.customConfig={profile}"]

    def deploy_allocator(self) -> None:
        self.driver.deploy(len(self.expectation.uuids))

    def remove_allocator(self) -> None:
        self.driver.remove()

    def allocator_diagnostics(self) -> list[Section]:
        return self.driver.diagnostics()

    def claimed_uuids(self, pod: str) -> list[str]:
        """Wait for the pod to run; the UUIDs of the devices its claim was allocated,
        as the driver's ResourceSlice gives them."""
        devices = self.driver.devices()
        return sorted(devices[name] for name in self.claims.allocated(pod))
