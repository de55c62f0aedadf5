"""Interop fixtures: the real upstream tools and a driver root.

Without the upstream tools (no Go to build them, no pinned tarball and no
network to clone) these tests skip on a developer's machine. Under CI (env CI
set and not "0"/"false") no test here may skip, for any reason: a skip is
reported as a failure instead, so `make interop` can only pass there by running.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.upstream import Upstream, UpstreamUnavailable, locate
from tests.interop.probe import Probe
from tests.support.ci import pytest_runtest_makereport  # noqa: F401  (no skips under CI)

A100 = Path(__file__).resolve().parents[1] / "data" / "a100.yaml"


@pytest.fixture(scope="session")
def upstream() -> Upstream:
    try:
        return locate()
    except UpstreamUnavailable as exc:
        pytest.skip(f"upstream nvml-mock tools unavailable: {exc}")


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """<driver-root>/config with the a100 profile as config.yaml (no overrides yet)."""
    d = tmp_path / "driver" / "config"
    d.mkdir(parents=True)
    shutil.copy(A100, d / "config.yaml")
    return d


@pytest.fixture
def probe(upstream: Upstream, config_dir: Path, tmp_path: Path) -> Iterator[Probe]:
    p = Probe(
        upstream, config_dir / "config.yaml", config_dir / "overrides.yaml", tmp_path / "nvml.log"
    )
    try:
        yield p
    finally:
        p.close()
