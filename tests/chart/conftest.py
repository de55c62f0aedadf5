"""Fixtures for the chart tests."""

from __future__ import annotations

import pytest

from tests.chart.helmtool import Helm, helm_binary


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    tool = Helm(helm_binary(), tmp_path_factory.mktemp("helm"))
    version = tool.run("version", "--short")
    # The assertions match Helm 4's messages (the chart itself also works with Helm 3).
    if version.returncode != 0 or not version.stdout.startswith("v4."):
        pytest.fail(
            f"{tool.binary} is not Helm 4 ({version.stdout.strip() or version.stderr.strip()}): "
            "run hack/install-helm.sh or point HELM at a Helm 4 binary",
            pytrace=False,
        )
    return tool
