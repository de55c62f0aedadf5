"""Building what the publisher is asked to publish, in the tests' own terms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from allocwatch.ownedkeys import (
    MEMORY,
    PROCESSES,
    DeviceReading,
    Publication,
    publication,
)
from allocwatch.reconcile import MemoryReading


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
    surfaces = (MEMORY,) if processes is None else (MEMORY, PROCESSES)
    lists = processes or {}
    return publication(
        {i: DeviceReading(r, list(lists.get(i, []))) for i, r in readings.items()},
        surfaces,
        withdrawn=remove,
    )


def withdrawal(indices: Iterable[int], processes: bool = False) -> Publication:
    """Our keys removed from `indices` (`processes` too, when ours)."""
    return publication({}, (MEMORY, PROCESSES) if processes else (MEMORY,), withdrawn=indices)
