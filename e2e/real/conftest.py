"""Fixtures of the real stack (`pytest e2e --stack=real`): deployed once per run."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from e2e.conftest import pick_node
from e2e.framework.helm import Helm
from e2e.framework.kubectl import Kubectl
from e2e.framework.providers import Provider, ProviderUnavailable
from e2e.framework.realimages import RealImages
from e2e.framework.realstack import RealStack
from e2e.framework.teardown import deployed_for_run

# gpu_pod() -> the name of a Ready pod holding one nvidia.com/gpu
GpuPod = Callable[[], str]


@pytest.fixture(scope="session")
def real_stack(provider: Provider, pytestconfig: pytest.Config) -> Iterator[RealStack]:
    try:
        images = RealImages.from_env(
            getattr(provider, "found", {}), f"{provider.name} provider (run `make cluster-images`)"
        )
    except ProviderUnavailable as exc:
        pytest.exit(f"e2e --stack=real: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    kubectl = Kubectl(provider.kubeconfig, provider.kubectl_bin)
    node = pick_node(kubectl, pytestconfig.getoption("--node"))
    stack = RealStack(kubectl, Helm(provider.kubeconfig), images, node, "allocwatch-real-e2e")
    yield from deployed_for_run(stack, pytestconfig.getoption("--e2e-keep"))


@pytest.fixture
def real(real_stack: RealStack) -> RealStack:
    """The stack as every test starts from it: allocwatch installed by its chart, and
    the device plugin advertising each GPU once."""
    if real_stack.plugin_replicas != 1:
        real_stack.deploy_plugin(replicas=1)
    if not real_stack.allocwatch_installed:
        real_stack.install_allocwatch()
    return real_stack


@pytest.fixture
def gpu_pod(real: RealStack, request: pytest.FixtureRequest) -> Iterator[GpuPod]:
    """Start GPU pods; whatever is left is deleted afterwards."""
    created: list[str] = []
    base = request.node.name.replace("_", "-").lower()[:40].strip("-")

    def start() -> str:
        name = real.start_pod(f"{base}-{len(created)}")
        created.append(name)
        return name

    yield start
    real.delete_pods(created)
