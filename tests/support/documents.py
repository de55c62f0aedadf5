"""Building what the publisher is asked to publish, in the tests' own terms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from allocwatch.ownedkeys import ABSENT, MEMORY, PROCESSES, Publication, Surface, publication
from allocwatch.readings import DeviceReading
from allocwatch.reconcile import MemoryReading


def _removed(surfaces: Sequence[Surface], indices: Iterable[int]) -> dict[int, dict[Any, Any]]:
    return {index: {surface.key: ABSENT for surface in surfaces} for index in indices}


def wanted(
    readings: Mapping[int, MemoryReading],
    remove: Iterable[int] = (),
    processes: Mapping[int, Sequence[dict[str, Any]]] | None = None,
) -> Publication:
    """Memory `readings` published and our keys removed from `remove`.

    With `processes` (None: the key is left alone), each device in it gets
    that list, and every other device of `readings` or `remove` loses its
    `processes` key.
    """
    surfaces = (*MEMORY,) if processes is None else (*MEMORY, PROCESSES)
    lists = processes or {}
    out = publication(
        {i: DeviceReading(r, list(lists.get(i, []))) for i, r in readings.items()}, surfaces
    )
    return {**_removed(surfaces, [i for i in remove if i not in out]), **out}


def withdrawal(indices: Iterable[int], processes: bool = False) -> Publication:
    """Our keys removed from `indices` (`processes` too, when ours)."""
    return _removed((*MEMORY, PROCESSES) if processes else MEMORY, indices)
