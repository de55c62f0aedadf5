"""An in-process `Lister` the loop's tests set claims on, as upstream's stubLister."""

from __future__ import annotations

import threading

from allocwatch.claims import Claim, ClaimSource, ListError


def gpu_claim(
    namespace: str,
    pod: str,
    device_id: str,
    container: str = "main",
    resource: str = "nvidia.com/gpu",
) -> Claim:
    return Claim(namespace, pod, container, resource, device_id)


def dra_claim(namespace: str, pod: str, claim: str, device: str, container: str = "main") -> Claim:
    return Claim(
        namespace, pod, container, "gpu.nvidia.com", device, ClaimSource.DRA, namespace, claim
    )


class StubLister:
    """Lists what the test set last; fails with `error` while it is set."""

    def __init__(self, claims: list[Claim] | None = None) -> None:
        self._lock = threading.Lock()
        self._claims = list(claims or [])
        self._error: str | None = None
        self._calls = 0

    def set_claims(self, claims: list[Claim]) -> None:
        with self._lock:
            self._claims = list(claims)

    def fail(self, error: str | None) -> None:
        with self._lock:
            self._error = error

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls

    def list_claims(self) -> list[Claim]:
        with self._lock:
            self._calls += 1
            if self._error is not None:
                raise ListError(self._error)
            return list(self._claims)
