"""The watch loop: kubelet -> claims -> readings -> document, once per interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from allocwatch.claims import Lister, ListError
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.ownedkeys import MEMORY, PROCESSES, DeviceReading, publication
from allocwatch.processes import process_lists
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher, PublishError
from allocwatch.reconcile import reconcile
from allocwatch.reporter import Reporter
from allocwatch.shutdown import Deadline, Interrupted, Shutdown

log = logging.getLogger(__name__)

# The longest wait after a failed poll, whatever the interval.
RETRY_SECONDS = 1.0


class Watcher:
    def __init__(
        self,
        lister: Lister,
        profile: ProfileSource,
        publisher: OverridesPublisher,
        fraction: float,
        interval: float,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        processes: bool = True,
    ) -> None:
        self.lister = lister
        self.profile = profile
        self.publisher = publisher
        self.fraction = fraction
        self.interval = interval
        self.metrics = metrics or Metrics()
        self.reporter = Reporter(self.metrics, publisher.path)
        self.clock = clock
        # publish each claim as an NVML process (owns the key)
        self.surfaces = (MEMORY, PROCESSES) if processes else (MEMORY,)
        self._last_success: float | None = None
        self._published: set[int] = set()

    def poll(self, stop: Shutdown | None = None) -> PollOutcome:
        started = time.perf_counter()
        try:
            outcome = self._poll(stop)
        finally:
            self.reporter.poll_took(time.perf_counter() - started)
        self.reporter.polled(outcome)
        return outcome

    def _poll(self, stop: Shutdown | None) -> PollOutcome:
        devices = self.profile.refresh(stop)
        self.reporter.profile_loaded(devices is not None)
        if devices is None:
            self.reporter.no_profile(self.profile.error)
            return PollOutcome.NO_PROFILE
        try:
            claims = self.lister.list_claims()
        except ListError as exc:
            self.reporter.problem(f"{exc} (keeping the previous reading)")
            return PollOutcome.LIST_ERROR
        rec = reconcile(devices, claims, self.fraction)
        lists = process_lists(rec) if PROCESSES in self.surfaces else {}
        readings = {
            index: DeviceReading(memory, lists.get(index, []))
            for index, memory in rec.readings.items()
        }
        wanted = publication(readings, self.surfaces, withdrawn=self._published)
        try:
            result = self.publisher.publish(wanted, stop)
        except PublishError as exc:
            if stop is None or not stop.is_set():  # else: abandoned for shutdown
                self.reporter.problem(f"publish: {exc} (retrying every poll)")
            return PollOutcome.PUBLISH_ERROR
        self._published = set(rec.readings)
        self._last_success = self.clock()
        self.reporter.published(devices, rec, result.wrote)
        return PollOutcome.OK

    def run(self, stop: Shutdown) -> None:
        """Publish immediately, then once per interval, until `stop` is set.

        After a failed poll (no profile yet, a List or publish error) the next
        comes within RETRY_SECONDS even when the interval is longer: at `1h`
        a profile that appears, or a kubelet back from a restart, would
        otherwise wait up to an hour to be published.
        """
        next_tick = self.clock()
        while not stop.is_set():
            outcome = self.poll(stop)
            ok = outcome == PollOutcome.OK
            step = self.interval if ok else min(self.interval, RETRY_SECONDS)
            next_tick += step
            now = self.clock()
            if next_tick < now:  # overran: skip missed ticks rather than burst
                next_tick = now + step - ((now - next_tick) % step)
            stop.wait(max(0.0, next_tick - now))

    def remove_readings(self, timeout: float) -> bool:
        """Remove our keys from the devices this run published, within `timeout`.

        True when the file is clean of them. From the publisher's last look
        at the file: unchanged since, it is not parsed again, and a parse (of
        a file changed since) or lock wait that would run past `timeout` is
        given up.
        """
        if not self._published:
            return True
        try:
            wanted = publication({}, self.surfaces, withdrawn=sorted(self._published))
            result = self.publisher.publish(wanted, Deadline(timeout))
        except PublishError as exc:
            log.error("on exit: could not remove readings: %s", exc)
            return False
        except Interrupted:
            log.error(
                "on exit: could not remove readings: %s changed since the last poll and "
                "reading it again would take past %gs; they stay",
                self.publisher.path,
                timeout,
            )
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
