"""What the loop reports: the metrics, and one log line per change."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from allocwatch.logs import id_list, shorten
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.podwatch import WatchHealth
from allocwatch.profile import Device
from allocwatch.readings import Readings
from allocwatch.reconcile import MemoryReading

# The watch loop's logger, as before the reporter had a module: log queries name it.
log = logging.getLogger("allocwatch.watch")


class Reporter:
    """Turns each poll into metrics and a change log: quiet polls log nothing."""

    def __init__(self, metrics: Metrics, overrides_path: Path) -> None:
        self.metrics = metrics
        self.overrides_path = overrides_path
        self._readings: dict[int, MemoryReading] = {}
        self._claims: dict[int, int] = {}
        self._dra_claims: dict[int, int] = {}
        # (index, uuid, has_memory) of the devices the gauges show
        self._series: list[tuple[int, str, bool]] = []
        self._unknown_ids: list[str] = []
        self._left: dict[str, str] = {}  # "device <i> <surface>" -> why it is left alone
        self._last_problem: str | None = None

    def poll_took(self, seconds: float) -> None:
        self.metrics.poll_duration.observe(seconds)

    def polled(self, outcome: PollOutcome) -> None:
        self.metrics.polls.labels(outcome).inc()

    def profile_loaded(self, loaded: bool) -> None:
        self.metrics.profile_loaded.set(1 if loaded else 0)

    def no_profile(self, why: str | None) -> None:
        """ProfileSource has logged why; remembered so the recovery is logged."""
        self._last_problem = why
        if self._series:
            self.metrics.forget_devices()
        self._series = []
        self._readings = {}
        self._claims = {}
        self._dra_claims = {}

    def declared_load_health(self, health: WatchHealth) -> None:
        # The pod watch logs when it goes stale and comes back; the poll only counts.
        self.metrics.declared_load_stale.set(0 if health.current else 1)

    def problem(self, message: str) -> None:
        # One line per distinct problem, not one per failing poll.
        if message != self._last_problem:
            log.error("%s", message)
            self._last_problem = message

    def published(self, devices: Sequence[Device], readings: Readings, wrote: bool) -> None:
        rec = readings.rec
        if wrote:
            self.metrics.writes.inc()
        self.metrics.folded_processes.set(readings.folded)
        self._devices(
            devices, rec.readings, rec.claims_per_device, rec.dra_claims_per_device, wrote
        )
        self._activity_left(readings)
        self.metrics.unknown_ids.set(len(rec.unknown_ids))
        unknown = sorted(set(rec.unknown_ids))
        if unknown != self._unknown_ids:  # once per change, like the readings
            if unknown:
                log.info("ids matching no profile device: %s", id_list(unknown))
            else:
                log.info("every claimed id matches a profile device again")
            self._unknown_ids = unknown
        self.metrics.last_success.set(time.time())
        if self._last_problem is not None:
            log.info("recovered: publishing again")
            self._last_problem = None

    def _activity_left(self, readings: Readings) -> None:
        """What the profile cannot give is said once, when it changes."""
        left = {
            f"device {index} {surface}": why
            for index, reading in sorted(readings.devices.items())
            if reading.activity is not None
            for surface, why in reading.activity.left.items()
        }
        if left != self._left:
            for what, why in left.items():
                if self._left.get(what) != why:
                    log.info("%s: left alone (the profile has %s)", what, why)
            self._left = left

    def _devices(
        self,
        devices: Sequence[Device],
        readings: dict[int, MemoryReading],
        claims: dict[int, int],
        dra_claims: dict[int, int],
        wrote: bool,
    ) -> None:
        series = [(device.index, device.uuid, device.has_memory) for device in devices]
        same_claims = claims == self._claims and dra_claims == self._dra_claims
        if readings == self._readings and same_claims and series == self._series:
            if wrote:
                log.info("rewrote %s: it was missing or edited on disk", self.overrides_path)
            return  # a quiet poll: the gauges already hold these values
        changed = False
        new_series = series != self._series
        if new_series:
            # Drop the series of devices that left the profile, changed uuid
            # or lost their memory block.
            self.metrics.forget_devices()
            self._series = series
        for device in devices:
            new = readings.get(device.index)
            old = self._readings.get(device.index)
            count, dra = claims[device.index], dra_claims.get(device.index, 0)
            if (
                not new_series
                and new == old
                and count == self._claims.get(device.index)
                and dra == self._dra_claims.get(device.index)
            ):
                continue  # its gauges already hold these values
            if new is None:  # no memory in the profile: claims only
                self.metrics.device_claims(device.index, device.uuid, count, dra)
                continue
            gauges = self.metrics.device(device.index, device.uuid)
            gauges.claims.set(count)
            gauges.device_plugin_claims.set(count - dra)
            gauges.dra_claims.set(dra)
            gauges.used_bytes.set(new.used_bytes)
            gauges.free_bytes.set(new.free_bytes)
            if old != new:
                changed = True
                before = "none" if old is None else str(old.used_bytes)
                log.info(
                    "device %d (%s): used %s -> %d bytes, free %d, claims %d -> %d",
                    device.index,
                    shorten(device.uuid) or "no uuid",
                    before,
                    new.used_bytes,
                    new.free_bytes,
                    self._claims.get(device.index, 0),
                    count,
                )
        for index in sorted(self._readings.keys() - readings.keys()):
            changed = True
            log.info("device %d: reading removed (gone from the profile or its memory)", index)
        if wrote and not changed:
            log.info("rewrote %s: it was missing or edited on disk", self.overrides_path)
        self._readings = dict(readings)
        self._claims = dict(claims)
        self._dra_claims = dict(dra_claims)
