"""The declared loads of a node's pods: what is kept of each pod, bounded, and what is new.

Pure: the pod watch feeds it each pod's annotations as the API server reports
them, and logs the problems it returns. Only pods that carry one of the
annotations are kept, at most `max_pods` of them, each as the three values
(a value too long to read kept as a short fingerprint) and the load they
declare. A value is parsed, and its problem returned, only when it changes.
The snapshot of loads is a new read-only mapping after each change, so a
reader on another thread gets a consistent one without a lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from allocwatch.declaredload import (
    ANNOTATIONS,
    MAX_VALUE_LENGTH,
    NO_LOAD,
    DeclaredLoad,
    Problem,
    parse_annotations,
)

PodKey = tuple[str, str]  # (namespace, name)
# A node runs 110 pods by default and the kubelet allows a few hundred.
MAX_PODS = 1024
EMPTY: Mapping[PodKey, DeclaredLoad] = MappingProxyType({})


@dataclass(frozen=True)
class _Pod:
    values: tuple[str | None, ...]  # per ANNOTATIONS: the value, or its fingerprint if too long
    load: DeclaredLoad


def fingerprint(value: str | None) -> str | None:
    """The value itself, or, for one too long to keep, enough to see that it changed."""
    if value is None or len(value) <= MAX_VALUE_LENGTH:
        return value
    return f"<{len(value)} characters, hash {hash(value) & 0xFFFFFFFF:08x}>"


class PodLoads:
    def __init__(self, max_pods: int = MAX_PODS) -> None:
        self.max_pods = max_pods
        self._pods: dict[PodKey, _Pod] = {}
        self._snapshot = EMPTY
        self._changed = False

    def snapshot(self) -> Mapping[PodKey, DeclaredLoad]:
        """The pods that declare a load; the same object until one changes."""
        return self._snapshot

    def __len__(self) -> int:
        return len(self._pods)

    def set(self, key: PodKey, annotations: Mapping[str, str] | None) -> list[Problem] | None:
        """Record a pod's annotations (None when it is gone). Returns the problems of
        the values that changed, or None when the pod is not kept: it is new and
        `max_pods` pods are kept already."""
        problems = self._set(key, annotations)
        self._publish()
        return problems

    def replace(
        self, pods: Iterable[tuple[PodKey, Mapping[str, str] | None]]
    ) -> dict[PodKey, list[Problem] | None]:
        """Every pod at once, as a list gives them; the pods not among them are gone.
        Returns what `set` would, for each pod given."""
        pods = list(pods)
        # pods gone while the watch was away go first, or they would count to the cap
        for key in self._pods.keys() - {key for key, _ in pods}:
            del self._pods[key]
            self._changed = True
        results = {key: self._set(key, annotations) for key, annotations in pods}
        self._publish()
        return results

    def _set(self, key: PodKey, annotations: Mapping[str, str] | None) -> list[Problem] | None:
        ours = {k: annotations[k] for k in ANNOTATIONS if k in annotations} if annotations else {}
        old = self._pods.get(key)
        if not ours:
            if self._pods.pop(key, None) is not None:
                self._changed = True
            return []
        values = tuple(fingerprint(ours.get(k)) for k in ANNOTATIONS)
        if old is not None and old.values == values:
            return []
        if old is None and len(self._pods) >= self.max_pods:
            return None
        load, problems = parse_annotations(ours)
        self._pods[key] = _Pod(values, load)
        self._changed = True
        if old is None:
            return problems
        changed = [
            k for k, was, now in zip(ANNOTATIONS, old.values, values, strict=True) if was != now
        ]
        return [p for p in problems if p.annotation in changed]

    def _publish(self) -> None:
        if not self._changed:
            return
        self._changed = False
        loads = {key: pod.load for key, pod in self._pods.items() if pod.load != NO_LOAD}
        if loads != self._snapshot:
            self._snapshot = MappingProxyType(loads)
