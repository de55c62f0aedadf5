"""Shutdown stays within its second whatever the override file holds."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocwatch import profilesource, publisher
from allocwatch.document import Document, parse_document
from allocwatch.profile import Device
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher
from allocwatch.reconcile import MemoryReading
from allocwatch.shutdown import Deadline, Interrupted, Shutdown
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.waiting import wait_until
from tests.conftest import A100_UUIDS
from tests.support.documents import wanted
from tests.support.rig import HALF, Rig, memory
from tests.support.runqueue import OwnClock

pytestmark = pytest.mark.timing


@pytest.fixture
def rig(kubelet: FakePodResourcesLister, driver_root: Path) -> Iterator[Rig]:
    r = Rig(kubelet, driver_root)
    yield r
    r.close()


def slow_parse(seconds: float) -> object:
    """A parse that spends `seconds` in Python, as a large document does."""

    def parse(text: str) -> Document:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return parse_document(text)

    return parse


def test_removal_on_exit_does_not_parse_an_unchanged_file_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    wait_until(rig.shows({0: HALF}), what="published")
    rig.close()
    parses: list[str] = []
    monkeypatch.setattr(publisher, "parse_document", lambda t: parses.append(t) or {})
    assert rig.watcher.remove_readings(timeout=0.6)
    assert parses == []
    assert memory(rig.overrides) == {}


def test_removal_on_exit_gives_up_a_slow_parse_at_its_deadline_and_says_why(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rig.kubelet.set_pods([gpu_pod("ns", "a", [A100_UUIDS[0]])])
    rig.start()
    wait_until(rig.shows({0: HALF}), what="published")
    rig.close()
    # Another writer changes the file after the last poll; reading it is slow.
    changed = rig.overrides.read_text() + "all: {fan: {speed_percent: 50}}\n"
    rig.overrides.write_text(changed)
    monkeypatch.setattr(publisher, "parse_document", slow_parse(5))
    clock = OwnClock()
    with caplog.at_level(logging.ERROR):
        assert not rig.watcher.remove_readings(timeout=0.3)
    assert clock.seconds() < 0.6
    assert "could not remove readings" in caplog.text
    assert "changed since the last poll" in caplog.text
    assert rig.overrides.read_text() == changed  # left whole


@pytest.fixture
def shutdown() -> Iterator[Shutdown]:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGALRM)}
    stop = Shutdown()
    stop.install()
    yield stop
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def test_a_stop_signal_cuts_a_parse_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shutdown: Shutdown
) -> None:
    target = tmp_path / "overrides.yaml"
    target.write_text("all: {k: 1}\n")
    monkeypatch.setattr(publisher, "parse_document", slow_parse(5))
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    clock = OwnClock()
    with pytest.raises(Interrupted):
        OverridesPublisher(target).publish(wanted({0: MemoryReading(1, 2)}), shutdown)
    assert clock.seconds() < 1.0
    assert shutdown.is_set()
    assert target.read_text() == "all: {k: 1}\n"


def test_a_deadline_cuts_pure_work_but_never_outside_it() -> None:
    deadline = Deadline(0.2)
    clock = OwnClock()
    with pytest.raises(Interrupted), deadline.interruptible():
        time.sleep(5)
    assert clock.seconds() < 1.0
    with pytest.raises(Interrupted), deadline.interruptible():
        pass  # past its time: not begun
    handler = signal.getsignal(signal.SIGALRM)
    spare = Deadline(60)
    with spare.interruptible():
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0  # armed inside
    # disarmed and the handler put back: nothing fires out here
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler


def test_a_stop_signal_cuts_a_profile_parse_short_and_the_profile_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shutdown: Shutdown
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text('version: "1"\nsystem: {driver_version: "550"}\n')
    real_parse = profilesource.parse_profile

    def slow(text: str) -> list[Device]:
        slow_parse(5)("")
        return real_parse(text)

    monkeypatch.setattr(profilesource, "parse_profile", slow)
    source = ProfileSource(path)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    clock = OwnClock()
    with pytest.raises(Interrupted):
        source.refresh(shutdown)
    assert clock.seconds() < 1.0
    monkeypatch.setattr(profilesource, "parse_profile", real_parse)
    devices = source.refresh()  # not taken for read: the cut parse left nothing behind
    assert devices is not None and len(devices) == 8
