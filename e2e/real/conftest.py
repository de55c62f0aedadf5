"""Fixtures of the real stack (`pytest e2e --stack=real`): deployed once per run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

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


def _as_needed(stack: RealStack, replicas: int) -> RealStack:
    if stack.plugin_replicas != replicas:
        stack.deploy_plugin(replicas)
    if not stack.allocwatch_installed:
        stack.install_allocwatch()
    return stack


@pytest.fixture
def real(real_stack: RealStack) -> RealStack:
    """The stack as every test starts from it: allocwatch installed by its chart, and
    the device plugin advertising each GPU once."""
    return _as_needed(real_stack, replicas=1)


@pytest.fixture
def time_sliced(real_stack: RealStack) -> RealStack:
    """The stack with the device plugin advertising each GPU twice (time-slicing)."""
    return _as_needed(real_stack, replicas=2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The time-sliced tests last, together: the plugin restarts for a new
    # config, so interleaved they would redeploy it back and forth. Ordering
    # by fixture rather than by file keeps each file's tests where they read.
    here = Path(__file__).parent
    items.sort(
        key=lambda item: (
            here in item.path.parents and "time_sliced" in getattr(item, "fixturenames", ())
        )
    )


@pytest.fixture
def gpu_pod(real_stack: RealStack, request: pytest.FixtureRequest) -> Iterator[GpuPod]:
    """Start GPU pods; whatever is left is deleted afterwards."""
    created: list[str] = []
    base = request.node.name.replace("_", "-").lower()[:40].strip("-")

    def start() -> str:
        name = real_stack.start_pod(f"{base}-{len(created)}")
        created.append(name)
        return name

    yield start
    real_stack.delete_pods(created)
