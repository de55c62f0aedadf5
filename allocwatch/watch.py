"""The watch loop: kubelet -> claims -> readings -> document, once per interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from allocwatch.activity import DEFAULT_BUSY, Band
from allocwatch.claims import Claim, Lister, ListError
from allocwatch.declaredload import DeclaredLoad
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.ownedkeys import (
    ABSENT,
    ACTIVITY,
    MEMORY,
    PROCESSES,
    Publication,
    process_pids,
    publication,
    withdrawal,
)
from allocwatch.podwatch import LoadSource
from allocwatch.processes import PidTable
from allocwatch.profile import Device
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher, PublishError
from allocwatch.readings import Readings, Settings, read
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
        activity: bool = True,
        busy: Band = DEFAULT_BUSY,
        declared: LoadSource | None = None,
    ) -> None:
        self.lister = lister
        self.profile = profile
        self.publisher = publisher
        self.interval = interval
        self.metrics = metrics or Metrics()
        self.reporter = Reporter(self.metrics, publisher.path)
        self.clock = clock
        self.settings = Settings(fraction, processes, activity, busy)
        self.surfaces = (
            *MEMORY,
            *((PROCESSES,) if processes else ()),
            *(ACTIVITY if activity else ()),
        )
        self.declared = declared  # what pods declare of their load (--declared-load)
        self._pids = PidTable()
        # What the document showed of our processes when this run began.
        self._previous_pids: dict[tuple[int, str], int] | None = None
        self._last_success: float | None = None
        # What the last successful poll published: the keys this run owns now.
        self._published: Publication = {}
        # The last poll's inputs and what came of them: an unchanged List
        # and profile (an idle node) cost a comparison, not a recomputation
        # whose cost grows with the claims.
        self._last: tuple[object, object, object, Readings] | None = None
        self._last_wanted: tuple[Readings, Publication, Publication] | None = None

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
        if self._previous_pids is None and PROCESSES in self.surfaces:
            try:
                self._previous_pids = process_pids(self.publisher.document(stop))
            except PublishError:
                self._previous_pids = {}  # the publish below says why
        loads = None
        if self.declared is not None:
            loads = self.declared.loads()  # a snapshot: it never waits for the API server
            self.reporter.declared_load_health(self.declared.health())
        readings = self._read(devices, claims, loads)
        wanted = self._wanted(readings)
        try:
            result = self.publisher.publish(wanted, stop)
        except PublishError as exc:
            if stop is None or not stop.is_set():  # else: abandoned for shutdown
                self.reporter.problem(f"publish: {exc} (retrying every poll)")
            return PollOutcome.PUBLISH_ERROR
        self._published = wanted
        self._last_success = self.clock()
        self.reporter.published(devices, readings, result.wrote)
        return PollOutcome.OK

    def _read(
        self,
        devices: Sequence[Device],
        claims: Sequence[Claim],
        loads: Mapping[tuple[str, str], DeclaredLoad] | None,
    ) -> Readings:
        last = self._last
        if (
            last is not None
            and last[0] is devices
            and last[2] is loads
            and (last[1] is claims or last[1] == claims)
        ):
            return last[3]
        readings = read(devices, claims, self.settings, self._pids, self._previous_pids, loads)
        self._last = (devices, claims, loads, readings)
        return readings

    def _wanted(self, readings: Readings) -> Publication:
        """Our keys for `readings`; any other key we published last is removed."""
        last = self._last_wanted
        # After it is published, the answer is also what was published, and
        # asked again of the same readings it is the same answer: the same
        # object, so the publisher's own check of it is skipped too.
        if (
            last is not None
            and last[0] is readings
            and (last[1] is self._published or last[2] is self._published)
        ):
            return last[2]
        wanted = publication(readings.devices, self.surfaces)
        for index, keys in self._published.items():
            gone = {key: ABSENT for key in keys if key not in wanted.get(index, {})}
            if gone:
                wanted[index] = {**wanted.get(index, {}), **gone}
        self._last_wanted = (readings, self._published, wanted)
        return wanted

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
            wanted = withdrawal(self._published, list(self._published))
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
        self._published = {}
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
