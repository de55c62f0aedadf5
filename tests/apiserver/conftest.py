"""Fixtures for the tests against a real kube-apiserver (kubeapiserver/).

The binaries are the local cluster's, from `hack/cluster/build.sh`; `make
apiserver-test` builds them (or reuses the cache) first. Without them these
tests skip on a developer's machine; under CI a skip is a failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from devtools.kubeapiserver import ApiServer, ApiServerUnavailable, locate
from tests.chart.helmtool import Helm, helm_binary
from tests.support.ci import pytest_runtest_makereport  # noqa: F401  (no skips under CI)

_namespaces = itertools.count()


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    try:
        binaries = locate()
    except ApiServerUnavailable as exc:
        pytest.skip(f"kube-apiserver unavailable: {exc}")
    with ApiServer(binaries, tmp_path_factory.mktemp("apiserver")) as server:
        yield server


@pytest.fixture
def namespace(apiserver: ApiServer) -> Iterator[str]:
    name = f"t{next(_namespaces)}"
    apiserver.kubectl("create", "namespace", name)
    yield name
    apiserver.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force")


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_binary(), tmp_path_factory.mktemp("helm"))
