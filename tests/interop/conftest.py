"""Interop fixtures: the real upstream tools, a driver root, a short temp dir.

Without Go (and without ALLOCWATCH_UPSTREAM_DIR) these tests skip, except
under CI (env CI set), where they must run and so fail instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.interop.upstream import Upstream, UpstreamUnavailable, locate

A100 = Path(__file__).resolve().parents[1] / "data" / "a100.yaml"


@pytest.fixture(scope="session")
def upstream() -> Upstream:
    try:
        return locate()
    except UpstreamUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"upstream nvml-mock tools unavailable under CI: {exc}", pytrace=False)
        pytest.skip(f"upstream nvml-mock tools unavailable: {exc}")


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """<driver-root>/config with the a100 profile as config.yaml (no overrides yet)."""
    d = tmp_path / "driver" / "config"
    d.mkdir(parents=True)
    shutil.copy(A100, d / "config.yaml")
    return d
