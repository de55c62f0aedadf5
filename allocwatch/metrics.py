"""The Prometheus metrics the watcher exports, and the poll outcomes they count."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from allocwatch.claims import ClaimSource


class PollOutcome(enum.StrEnum):
    """What one poll came to; the value is the `result` label of allocwatch_polls_total."""

    OK = "ok"
    LIST_ERROR = "list_error"
    PUBLISH_ERROR = "publish_error"
    NO_PROFILE = "no_profile"


@dataclass(frozen=True)
class DeviceSeries:
    """One device's labelled gauges."""

    claims: Gauge
    used_bytes: Gauge
    free_bytes: Gauge
    device_plugin_claims: Gauge
    dra_claims: Gauge


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        labels = ("index", "uuid")
        self.claims = Gauge(
            "allocwatch_device_claims",
            "Claims on the device in the last List",
            labels,
            registry=r,
        )
        # A series of its own, not a label on allocwatch_device_claims: a new
        # label would change every existing series and break their queries.
        self.claims_by_source = Gauge(
            "allocwatch_device_claims_by_source",
            "Claims on the device in the last List, by how the kubelet allocated them",
            (*labels, "source"),
            registry=r,
        )
        self.used_bytes = Gauge(
            "allocwatch_device_used_bytes", "Published memory.used_bytes", labels, registry=r
        )
        self.free_bytes = Gauge(
            "allocwatch_device_free_bytes", "Published memory.free_bytes", labels, registry=r
        )
        self.polls = Counter("allocwatch_polls", "Polls by result", ("result",), registry=r)
        self.writes = Counter("allocwatch_writes", "Writes of the override file", registry=r)
        self.folded_processes = Gauge(
            "allocwatch_folded_processes",
            "Claims in the last poll shown only in a device's `+<n> more claims` process entry",
            registry=r,
        )
        self.declared_load_rejected = Counter(
            "allocwatch_declared_load_rejected",
            "Pod annotations declaring a load that could not be read, by annotation",
            ("annotation",),
            registry=r,
        )
        self.declared_load_stale = Gauge(
            "allocwatch_declared_load_stale",
            "1 while the pods' annotations are not current (the API server is away)",
            registry=r,
        )
        self.unknown_ids = Gauge(
            "allocwatch_unknown_device_ids",
            "Claimed device ids in the last List that match no profile device",
            registry=r,
        )
        self.last_success = Gauge(
            "allocwatch_last_success_timestamp_seconds",
            "Unix time of the last successful poll",
            registry=r,
        )
        self.poll_duration = Histogram(
            "allocwatch_poll_duration_seconds",
            "Time spent in one poll",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5),
            registry=r,
        )
        self.profile_loaded = Gauge(
            "allocwatch_profile_loaded", "1 when a usable profile is loaded", registry=r
        )
        for outcome in PollOutcome:
            self.polls.labels(outcome)
        self._devices: dict[tuple[int, str], DeviceSeries] = {}

    def device(self, index: int, uuid: str) -> DeviceSeries:
        """The device's gauges, looked up once: labels() costs more than set()."""
        series = self._devices.get((index, uuid))
        if series is None:
            labels = (str(index), uuid)
            series = self._devices[(index, uuid)] = DeviceSeries(
                self.claims.labels(*labels),
                self.used_bytes.labels(*labels),
                self.free_bytes.labels(*labels),
                self.claims_by_source.labels(*labels, ClaimSource.DEVICE_PLUGIN.value),
                self.claims_by_source.labels(*labels, ClaimSource.DRA.value),
            )
        return series

    def device_claims(self, index: int, uuid: str, claims: int, dra_claims: int) -> None:
        """The claim gauges alone, for a device that has no memory series."""
        labels = (str(index), uuid)
        self.claims.labels(*labels).set(claims)
        by_source = self.claims_by_source
        by_source.labels(*labels, ClaimSource.DEVICE_PLUGIN.value).set(claims - dra_claims)
        by_source.labels(*labels, ClaimSource.DRA.value).set(dra_claims)

    def forget_devices(self) -> None:
        for gauge in (self.claims, self.claims_by_source, self.used_bytes, self.free_bytes):
            gauge.clear()
        self._devices.clear()
