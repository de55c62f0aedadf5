"""An in-process `Lister` the loop's tests set claims on, as upstream's stubLister, and a
`LoadSource` they set declared loads on."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from allocwatch.claims import Claim, ClaimSource, ListError
from allocwatch.declaredload import DeclaredLoad
from allocwatch.podwatch import WatchHealth


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


class StubLoads:
    """A `LoadSource` the loop's tests set declared loads and the watch's health on."""

    def __init__(self) -> None:
        self._loads: dict[tuple[str, str], DeclaredLoad] = {}
        self._health = WatchHealth(True, None, None)

    def declare(self, namespace: str, pod: str, load: DeclaredLoad | None) -> None:
        loads = dict(self._loads)  # a new snapshot, as the watch swaps its whole
        if load is None:
            loads.pop((namespace, pod), None)
        else:
            loads[(namespace, pod)] = load
        self._loads = loads

    def go_stale(self, why: str | None) -> None:
        self._health = WatchHealth(why is None, None if why is None else 1.0, why)

    def loads(self) -> Mapping[tuple[str, str], DeclaredLoad]:
        return self._loads

    def health(self) -> WatchHealth:
        return self._health
