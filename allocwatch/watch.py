"""The watch loop: kubelet → claims → readings → document, once per interval."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from allocwatch.metrics import Metrics
from allocwatch.overrides import OverridesPublisher, PublishError
from allocwatch.podresources import ListError, PodResourcesClient
from allocwatch.profile import Device, ProfileSource
from allocwatch.reconcile import MemoryReading, reconcile

log = logging.getLogger(__name__)

OK = "ok"
LIST_ERROR = "list_error"
PUBLISH_ERROR = "publish_error"
NO_PROFILE = "no_profile"
# The longest wait after a failed poll, whatever the interval.
RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class PollResult:
    result: str
    wrote: bool = False


class Watcher:
    def __init__(
        self,
        client: PodResourcesClient,
        profile: ProfileSource,
        publisher: OverridesPublisher,
        fraction: float,
        interval: float,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.profile = profile
        self.publisher = publisher
        self.fraction = fraction
        self.interval = interval
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.polls = 0
        self._last_success: float | None = None
        self._readings: dict[int, MemoryReading] = {}
        self._claims: dict[int, int] = {}
        # (index, uuid, has_memory) of the devices the gauges show
        self._series: list[tuple[int, str, bool]] = []
        self._published: set[int] = set()
        self._unknown_ids: list[str] = []
        self._last_problem: str | None = None

    # --- one poll -------------------------------------------------------

    def poll(self, stop: threading.Event | None = None) -> PollResult:
        started = time.perf_counter()
        try:
            outcome = self._poll(stop)
        finally:
            self.metrics.poll_duration.observe(time.perf_counter() - started)
        self.polls += 1
        self.metrics.polls.labels(outcome.result).inc()
        return outcome

    def _poll(self, stop: threading.Event | None) -> PollResult:
        devices = self.profile.refresh()
        self.metrics.profile_loaded.set(1 if devices is not None else 0)
        if devices is None:
            # ProfileSource has logged why; remembered so recovery is logged.
            self._last_problem = self.profile.error
            self._forget_devices()
            return PollResult(NO_PROFILE)
        try:
            claims = self.client.list_claims()
        except ListError as exc:
            self._problem(f"{exc} (keeping the previous reading)")
            return PollResult(LIST_ERROR)
        rec = reconcile(devices, claims, self.fraction)
        stale = self._published - set(rec.readings)
        try:
            result = self.publisher.publish(rec.readings, stop, remove=stale)
        except PublishError as exc:
            if stop is None or not stop.is_set():  # else: abandoned for shutdown
                self._problem(f"publish: {exc} (retrying every poll)")
            return PollResult(PUBLISH_ERROR)
        self._published = set(rec.readings)
        if result.wrote:
            self.metrics.writes.inc()
        self._report(devices, rec.readings, rec.claims_per_device, result.wrote)
        self.metrics.unknown_ids.set(len(rec.unknown_ids))
        unknown = sorted(set(rec.unknown_ids))
        if unknown != self._unknown_ids:  # once per change, like the readings
            if unknown:
                log.info("ids matching no profile device: %s", ", ".join(unknown))
            else:
                log.info("every claimed id matches a profile device again")
            self._unknown_ids = unknown
        self._last_success = self.clock()
        self.metrics.last_success.set(time.time())
        if self._last_problem is not None:
            log.info("recovered: publishing again")
            self._last_problem = None
        return PollResult(OK, wrote=result.wrote)

    def _problem(self, message: str) -> None:
        # One line per distinct problem, not one per failing poll.
        if message != self._last_problem:
            log.error("%s", message)
            self._last_problem = message

    def _forget_devices(self) -> None:
        """Drop the per-device gauges: with no profile there is no reading to show."""
        if self._series:
            self.metrics.forget_devices()
        self._series = []
        self._readings = {}
        self._claims = {}

    def _report(
        self,
        devices: list[Device],
        readings: dict[int, MemoryReading],
        claims: dict[int, int],
        wrote: bool,
    ) -> None:
        series = [(device.index, device.uuid, device.has_memory) for device in devices]
        if readings == self._readings and claims == self._claims and series == self._series:
            if wrote:
                log.info("rewrote %s: it was missing or edited on disk", self.publisher.path)
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
            count = claims[device.index]
            if not new_series and new == old and count == self._claims.get(device.index):
                continue  # its gauges already hold these values
            if new is None:  # no memory in the profile: claims only
                self.metrics.claims.labels(str(device.index), device.uuid).set(count)
                continue
            gauges = self.metrics.device(device.index, device.uuid)
            gauges.claims.set(count)
            gauges.used_bytes.set(new.used_bytes)
            gauges.free_bytes.set(new.free_bytes)
            if old != new:
                changed = True
                before = "none" if old is None else str(old.used_bytes)
                log.info(
                    "device %d (%s): used %s -> %d bytes, free %d, claims %d -> %d",
                    device.index,
                    device.uuid or "no uuid",
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
            log.info("rewrote %s: it was missing or edited on disk", self.publisher.path)
        self._readings = dict(readings)
        self._claims = dict(claims)

    # --- the loop -------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Publish immediately, then once per interval, until `stop` is set.

        After a failed poll (no profile yet, a List or publish error) the next
        comes within RETRY_SECONDS even when the interval is longer: at `1h`
        a profile that appears, or a kubelet back from a restart, would
        otherwise wait up to an hour to be published.
        """
        next_tick = self.clock()
        while not stop.is_set():
            outcome = self.poll(stop)
            step = self.interval if outcome.result == OK else min(self.interval, RETRY_SECONDS)
            next_tick += step
            now = self.clock()
            if next_tick < now:  # overran: skip missed ticks rather than burst
                next_tick = now + step - ((now - next_tick) % step)
            stop.wait(max(0.0, next_tick - now))

    def retract(self, timeout: float) -> bool:
        """Remove the memory keys this run wrote. Returns True when the file is clean."""
        if not self._published:
            return True
        publisher = OverridesPublisher(self.publisher.path, lock_timeout=timeout)
        try:
            result = publisher.retract(sorted(self._published))
        except PublishError as exc:
            log.error("on exit: could not remove readings: %s", exc)
            return False
        if result.wrote:
            log.info("on exit: removed memory readings from %s", self.publisher.path)
        self._published.clear()
        return True

    def ready(self) -> tuple[bool, str]:
        if self.profile.devices is None:
            return False, f"not ready: {self.profile.error or 'no profile loaded'}"
        if self._last_success is None:
            return False, "not ready: no successful poll yet"
        age = self.clock() - self._last_success
        if age > 3 * self.interval:
            return False, f"not ready: last successful poll {age:.1f}s ago"
        return True, "ok"
