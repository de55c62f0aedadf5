"""Fixtures of the real stack's DRA variant (`pytest e2e --stack=real-dra`): deployed once
per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.conftest import pick_node
from e2e.framework.draworkloads import DraPods
from e2e.framework.helm import Helm
from e2e.framework.kubectl import Kubectl
from e2e.framework.providers import Provider, ProviderUnavailable
from e2e.framework.realdra import RealDraStack
from e2e.framework.realimages import DraDriverImages, RealImages
from e2e.framework.teardown import deployed_for_run


@pytest.fixture(scope="session")
def real_dra_stack(
    provider: Provider, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealDraStack]:
    source = f"{provider.name} provider (run `make cluster-images`)"
    found = getattr(provider, "found", {})
    try:
        images = RealImages.from_env(found, source)
        driver = DraDriverImages.from_env(found, source)
    except ProviderUnavailable as exc:
        pytest.exit(f"e2e --stack=real-dra: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    kubectl = Kubectl(provider.kubeconfig, provider.kubectl_bin)
    node = pick_node(kubectl, pytestconfig.getoption("--node"))
    stack = RealDraStack(
        kubectl,
        Helm(provider.kubeconfig),
        images,
        driver,
        node,
        "allocwatch-real-dra-e2e",
        tmp_path_factory.mktemp("real-dra"),
    )
    yield from deployed_for_run(stack, pytestconfig.getoption("--e2e-keep"))


@pytest.fixture
def real(real_dra_stack: RealDraStack) -> RealDraStack:
    """The stack as every test starts from it: allocwatch installed by its chart."""
    if not real_dra_stack.allocwatch_installed:
        real_dra_stack.install_allocwatch()
    return real_dra_stack


@pytest.fixture
def dra_pods(real: RealDraStack, request: pytest.FixtureRequest) -> Iterator[DraPods]:
    """Start DRA pods and claims; whatever is left is deleted afterwards."""
    base = request.node.name.replace("_", "-").lower()[:40].strip("-")
    pods = DraPods(real.claims, base)
    yield pods
    real.delete_pods(pods.pods)
    real.claims.delete_claims(*pods.claims)
    real.claims.delete_claims(*pods.templates, templates=True)
