"""Shared fixtures: short socket paths, the a100 profile, a driver root."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocwatch.profile import Device
from allocwatch.profilesource import load_devices
from devtools.podresources import FakePodResourcesLister

DATA = Path(__file__).parent / "data"
A100 = DATA / "a100.yaml"
A100_UUIDS = [f"GPU-12345678-1234-1234-1234-12345678000{i}" for i in range(8)]
A100_APERTURE = 42949672960 - 611319808  # 42338353152
A100_HALF = 21169176576


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """Unix socket paths are limited to ~108 bytes; pytest's tmp_path is too long."""
    d = Path(tempfile.mkdtemp(prefix="aw-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def driver_root(tmp_path: Path) -> Path:
    """An nvml-mock driver root with the a100 profile staged."""
    config = tmp_path / "driver" / "config"
    config.mkdir(parents=True)
    shutil.copy(A100, config / "config.yaml")
    return tmp_path / "driver"


@pytest.fixture
def a100() -> list[Device]:
    return load_devices(A100)


@pytest.fixture
def kubelet(short_tmp: Path) -> Iterator[FakePodResourcesLister]:
    with FakePodResourcesLister(short_tmp / "kubelet.sock") as k:
        yield k
