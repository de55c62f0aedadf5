"""Claims: who holds which device. Pure: the type, and the seam that lists them.

The pod-resources client produces claims; the watch loop sees only `Lister`,
so the loop and the arithmetic read and test without grpc.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Claim:
    """One device id held by one container of one pod."""

    namespace: str
    pod: str
    container: str
    resource_name: str
    device_id: str


def physical_device_id(device_id: str) -> str:
    """The GPU behind a time-slicing/MPS replica id `GPU-<uuid>::<n>`; other ids as they are."""
    return device_id.split("::", 1)[0]


class ListError(RuntimeError):
    """Listing failed; the caller keeps its previous reading."""


class Lister(Protocol):
    """Lists every claim on the node now; raises ListError when it cannot."""

    def list_claims(self) -> list[Claim]: ...
