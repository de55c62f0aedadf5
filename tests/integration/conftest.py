"""Fixtures of the integration tests: the watch loop on a fake kubelet in another process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.podresources import FakePodResourcesLister
from tests.support.rig import Rig


@pytest.fixture
def rig(kubelet: FakePodResourcesLister, driver_root: Path) -> Iterator[Rig]:
    r = Rig(kubelet, driver_root)
    yield r
    r.close()
