"""The flock on `overrides.yaml.lock` against real competing processes."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocwatch.document import parse_document
from allocwatch.publisher import OverridesPublisher, PublishError
from allocwatch.reconcile import MemoryReading
from allocwatch.shutdown import Shutdown
from tests.support.documents import wanted
from tests.support.lockholder import hold_lock, release
from tests.support.runqueue import OwnClock

pytestmark = pytest.mark.timing

# A competing writer that behaves like nvml-mock-ctl: flock the sidecar, load,
# bump a counter in another device's bucket, write atomically, unlock.
COMPETITOR = r"""
import fcntl, os, sys, tempfile, yaml
path, n = sys.argv[1], int(sys.argv[2])
for _ in range(n):
    fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        doc = (yaml.safe_load(open(path)) if os.path.exists(path) else None) or {}
        bucket = doc.setdefault("devices", {}).setdefault("7", {})
        thermal = bucket.setdefault("thermal", {})
        thermal["counter"] = thermal.get("counter", 0) + 1
        tfd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".overrides-")
        with os.fdopen(tfd, "w") as f:
            yaml.safe_dump(doc, f)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
"""


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return tmp_path / "overrides.yaml"


@pytest.fixture
def holder(target: Path) -> Iterator[subprocess.Popen[str]]:
    proc = hold_lock(Path(str(target) + ".lock"))
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_competing_holder_delays_our_publish(target: Path, holder: subprocess.Popen[str]) -> None:
    pub = OverridesPublisher(target, lock_timeout=10)
    done = threading.Event()
    errors: list[BaseException] = []
    clock: list[OwnClock] = []

    def publish() -> None:
        try:
            pub.publish(wanted({0: MemoryReading(1, 2)}))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        if clock:
            clock[0].mark()
        done.set()

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    assert not done.wait(0.5), "published while another process held the lock"
    assert not target.exists()
    clock.append(OwnClock(publisher))
    release(holder)
    assert done.wait(5)
    assert not errors
    assert clock[0].seconds() < 1.0
    assert parse_document(target.read_text())["devices"]["0"]["memory"]["used_bytes"] == 1


def test_lock_timeout_skips_the_publish(target: Path, holder: subprocess.Popen[str]) -> None:
    with pytest.raises(PublishError, match="still held"):
        OverridesPublisher(target, lock_timeout=0.3).publish(wanted({0: MemoryReading(1, 2)}))
    assert not target.exists()


def test_an_idle_publish_stays_off_a_held_lock(target: Path) -> None:
    # nvml-mock-ctl may hold the lock for a while; a poll with nothing to
    # write must neither wait for it nor fail.
    pub = OverridesPublisher(target, lock_timeout=0.3)
    pub.publish(wanted({0: MemoryReading(1, 2)}))
    holder = hold_lock(Path(str(target) + ".lock"))
    try:
        assert not pub.publish(wanted({0: MemoryReading(1, 2)})).wrote
        with pytest.raises(PublishError, match="still held"):
            pub.publish(wanted({0: MemoryReading(3, 0)}))
    finally:
        release(holder)


def test_shutdown_cancels_a_lock_wait(target: Path, holder: subprocess.Popen[str]) -> None:
    stop = Shutdown()
    stop.set()
    clock = OwnClock()
    with pytest.raises(PublishError, match="cancelled"):
        OverridesPublisher(target, lock_timeout=10).publish(wanted({0: MemoryReading(1, 2)}), stop)
    assert clock.seconds() < 1.0


def test_no_update_lost_across_200_interleaved_writes(target: Path) -> None:
    n = 200
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR, str(target), str(n)])
    pub = OverridesPublisher(target, lock_timeout=30)
    writes = 0
    for i in range(1, n + 1):
        assert pub.publish(wanted({0: MemoryReading(i, 10_000 - i)})).wrote
        writes += 1
    assert competitor.wait(timeout=120) == 0
    doc = parse_document(target.read_text())
    assert doc["devices"]["7"]["thermal"]["counter"] == n
    assert doc["devices"]["0"]["memory"] == {"used_bytes": n, "free_bytes": 10_000 - n}
    assert writes == n
    assert Path(str(target) + ".lock").exists()


def test_a_filesystem_without_flock_refuses_rather_than_locking_alone(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nvml-mock-ctl takes only flock; a marker-file lock would exclude no one.
    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOSYS, "flock not supported")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with pytest.raises(PublishError, match=r"overrides\.yaml\.lock.*not supported"):
        OverridesPublisher(target, lock_timeout=1).publish(wanted({0: MemoryReading(1, 2)}))
    assert not target.exists()


def test_the_lock_and_override_files_are_0644_whatever_the_umask(target: Path) -> None:
    # A 0600 lock file would keep a non-root nvml-mock-ctl from opening it,
    # and a 0600 override file would keep a non-root NVML process from reading it.
    old = os.umask(0o077)
    try:
        pub = OverridesPublisher(target)
        pub.publish(wanted({0: MemoryReading(1, 2)}))
        assert stat.S_IMODE(target.stat().st_mode) == 0o644
        pub.publish(wanted({0: MemoryReading(3, 0)}))  # a rewrite, through the temp file
    finally:
        os.umask(old)
    assert stat.S_IMODE(Path(str(target) + ".lock").stat().st_mode) == 0o644
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_replaced_lock_file_is_the_one_locked(target: Path) -> None:
    # The lock file is opened per publish: after an nvml-mock restart
    # re-creates it, holding the old inode would exclude no one.
    pub = OverridesPublisher(target, lock_timeout=0.3)
    assert pub.publish(wanted({0: MemoryReading(1, 2)})).wrote
    lock = Path(str(target) + ".lock")
    lock.unlink()
    lock.touch()
    holder = hold_lock(lock)
    try:
        with pytest.raises(PublishError, match="still held"):
            pub.publish(wanted({0: MemoryReading(3, 4)}))
    finally:
        release(holder)


def test_a_lock_path_that_is_a_directory_is_a_publish_error(target: Path) -> None:
    Path(str(target) + ".lock").mkdir()
    with pytest.raises(PublishError, match=r"lock .*overrides\.yaml\.lock: Is a directory"):
        OverridesPublisher(target).publish(wanted({0: MemoryReading(1, 2)}))
