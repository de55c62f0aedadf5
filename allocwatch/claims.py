"""Claims: who holds which device. Pure: the type, and the seam that lists them.

The pod-resources client produces claims; the watch loop sees only `Lister`,
so the loop and the arithmetic read and test without grpc.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class ClaimSource(StrEnum):
    """How the kubelet handed the device out; the value is the metrics label."""

    DEVICE_PLUGIN = "device_plugin"
    DRA = "dra"


@dataclass(frozen=True)
class Claim:
    """One device held by one container of one pod.

    A device-plugin claim names the device by the plugin's id (`GPU-<uuid>`).
    A DRA claim names it by its driver (in `resource_name`), pool and device
    name (`gpu-<minor>`, in `device_id`), and carries the ResourceClaim it
    came from and, for a shared slice of the device, its share id.
    """

    namespace: str
    pod: str
    container: str
    resource_name: str
    device_id: str
    source: ClaimSource = ClaimSource.DEVICE_PLUGIN
    claim_namespace: str = ""
    claim_name: str = ""
    pool: str = ""
    share_id: str | None = None


def physical_device_id(device_id: str) -> str:
    """The GPU behind a time-slicing/MPS replica id `GPU-<uuid>::<n>`; other ids as they are."""
    return device_id.split("::", 1)[0]


class ListError(RuntimeError):
    """Listing failed; the caller keeps its previous reading."""


class Lister(Protocol):
    """Lists every claim on the node now; raises ListError when it cannot."""

    def list_claims(self) -> Sequence[Claim]: ...
