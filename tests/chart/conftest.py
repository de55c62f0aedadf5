"""Fixtures for the chart tests."""

from __future__ import annotations

import pytest

from tests.chart.helmtool import Helm, helm_binary


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_binary(), tmp_path_factory.mktemp("helm"))
