"""Claims → what allocwatch publishes on each device this poll. Pure: no I/O, no clock.

Kubelet → claims → readings → document: this is the third arrow. It places
the claims (reconcile), and from that every device's memory reading and
process list; `ownedkeys` turns a device's reading into its keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from allocwatch.activity import DEFAULT_BUSY, Activity, Band, activity
from allocwatch.claims import Claim
from allocwatch.declaredload import DeclaredLoad
from allocwatch.processes import PidTable, ProcessEntry, ProcessLists, process_lists
from allocwatch.profile import Device
from allocwatch.reconcile import MemoryReading, Reconciliation, reconcile


@dataclass(frozen=True)
class Settings:
    fraction: float = 0.5  # of a GPU's usable memory, per claim
    processes: bool = True  # publish each claim as an NVML process
    activity: bool = True  # publish utilization, power and temperature
    busy: Band = DEFAULT_BUSY  # a claim's utilization band


@dataclass(frozen=True)
class DeviceReading:
    """What allocwatch has to say about one device this poll."""

    memory: MemoryReading
    processes: list[ProcessEntry]  # [] when nothing holds the device
    activity: Activity | None = None  # None: activity is not published


@dataclass(frozen=True)
class Readings:
    rec: Reconciliation  # where the claims landed, for the metrics and the log
    devices: dict[int, DeviceReading]  # every device that has a memory reading
    folded: int = 0  # claims folded into a `+<n> more claims` process entry


def read(
    devices: Sequence[Device],
    claims: Sequence[Claim],
    settings: Settings,
    pids: PidTable,
    previous_pids: Mapping[tuple[int, str], int] | None = None,
    loads: Mapping[tuple[str, str], DeclaredLoad] | None = None,
) -> Readings:
    """`previous_pids`: each (device, process name) the document showed before a restart.
    `loads`: what pods declared, by (namespace, pod); the others get `settings`."""
    rec = reconcile(devices, claims, settings.fraction, loads)

    def band_of(claim: Claim) -> Band:
        load = (loads or {}).get((claim.namespace, claim.pod))
        return load.utilization if load and load.utilization else settings.busy

    lists = (
        process_lists(rec, pids, previous_pids, band_of if settings.activity else None)
        if settings.processes
        else ProcessLists({}, 0)
    )
    by_index = {device.index: device for device in devices}
    return Readings(
        rec,
        {
            index: DeviceReading(
                memory,
                lists.lists.get(index, []),
                activity(by_index[index], [band_of(c) for c in rec.claims_on[index]])
                if settings.activity
                else None,
            )
            for index, memory in rec.readings.items()
        },
        lists.folded,
    )
