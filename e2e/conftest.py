"""e2e fixtures: pick a provider, deploy the stack once, record durations.

pytest e2e --provider=kind|existing|local     (or ALLOCWATCH_E2E_PROVIDER)
pytest e2e --provider=local --stack=real      (e2e/real: NVIDIA's nvml-mock, device plugin)
pytest e2e --provider=local --stack=real-dra  (e2e/real_dra: nvml-mock, NVIDIA's DRA driver)

The stacks all own the node's nvml-mock files, so one run tests one of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.waiting import wait_until
from e2e.framework import timings
from e2e.framework.expected import Expectation
from e2e.framework.helm import Helm
from e2e.framework.kubectl import Kubectl
from e2e.framework.providers import (
    ExistingProvider,
    KindProvider,
    LocalProvider,
    Provider,
    ProviderUnavailable,
)
from e2e.framework.stack import DEFAULT_PLUGIN_ARGS, GpuPods, Settings, Stack
from e2e.framework.teardown import deployed_for_run

PROVIDERS = ("kind", "existing", "local")
STACKS = ("fake", "real", "real-dra")
# each real stack's tests; the fake stack's are e2e/test_*.py
STACK_TESTS = {
    "real": Path(__file__).parent / "real",
    "real-dra": Path(__file__).parent / "real_dra",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("allocwatch e2e")
    group.addoption(
        "--provider",
        choices=PROVIDERS,
        default=os.environ.get("ALLOCWATCH_E2E_PROVIDER", "kind"),
        help="where the cluster comes from (env ALLOCWATCH_E2E_PROVIDER; default kind)",
    )
    group.addoption(
        "--nvml-mock",
        choices=("stage", "installed"),
        default="stage",
        help="stage our 4-GPU profile on the node (default), or use the config.yaml of an "
        "nvml-mock already installed there",
    )
    group.addoption(
        "--stack",
        choices=STACKS,
        default="fake",
        help="fake: the node helper and a fake device plugin (default); real: NVIDIA's "
        "nvml-mock by its chart, its device plugin and nvidia-smi (e2e/real); real-dra: "
        "the same with NVIDIA's DRA driver instead of the device plugin (e2e/real_dra)",
    )
    group.addoption("--node", default=None, help="the node to test (default: the first Ready)")
    group.addoption(
        "--e2e-keep", action="store_true", help="leave the deployed objects behind after the run"
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Collect only the chosen stack's tests."""
    chosen = STACK_TESTS.get(config.getoption("--stack"))
    for tests in STACK_TESTS.values():
        if tests != chosen and (collection_path == tests or tests in collection_path.parents):
            return True
    here = Path(__file__).parent
    top_level_test = collection_path.parent == here and collection_path.name.startswith("test_")
    return True if chosen and top_level_test else None


def _option(config: pytest.Config, name: str) -> Any:
    """pytest-kind's options (--kind-bin, --keep-cluster, ...) when it is installed."""
    try:
        return config.getoption(name)
    except ValueError:
        return None


def _cluster_name(option: str | None) -> str:
    """pytest-kind's --cluster-name, unless it is left at pytest-kind's own default."""
    return option if option and option != "pytest-kind" else "allocwatch-e2e"


def make_provider(config: pytest.Config) -> Provider:
    name = config.getoption("--provider")
    if name == "kind":
        return KindProvider(
            cluster_name=_cluster_name(_option(config, "--cluster-name")),
            kind_bin=_option(config, "--kind-bin"),
            kubectl_bin=_option(config, "--kind-kubectl-bin"),
            node_image=_option(config, "--kind-image"),
            keep_cluster=bool(_option(config, "--keep-cluster")),
        )
    if name == "local":
        return LocalProvider()
    return ExistingProvider()


@pytest.fixture(scope="session")
def provider(pytestconfig: pytest.Config) -> Iterator[Provider]:
    p = make_provider(pytestconfig)
    try:
        with timings.phase("provider setup"):
            p.setup()
    except ProviderUnavailable as exc:
        # A run that cannot reach a cluster must not pass by skipping every test.
        pytest.exit(f"e2e: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    except BaseException:
        p.teardown()  # a cluster this run created is not left behind
        raise
    yield p
    with timings.phase("provider teardown"):
        p.teardown()


def pick_node(kubectl: Kubectl, wanted: str | None) -> str:
    def ready_nodes() -> list[str]:
        nodes = kubectl.get("nodes")["items"]
        return sorted(
            n["metadata"]["name"]
            for n in nodes
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n["status"].get("conditions", [])
            )
        )

    nodes = wait_until(ready_nodes, 180, "a Ready node", interval=1)
    if wanted:
        wait_until(lambda: wanted in ready_nodes(), 180, f"node {wanted} to be Ready", interval=1)
        return wanted
    return nodes[0]


@pytest.fixture(scope="session")
def stack(
    provider: Provider, pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    kubectl = Kubectl(provider.kubeconfig, provider.kubectl_bin)
    settings = Settings(
        stage=pytestconfig.getoption("--nvml-mock") == "stage",
        kubelet_root=getattr(provider, "kubelet_root", Settings.kubelet_root),
    )
    node = pick_node(kubectl, pytestconfig.getoption("--node"))
    s = Stack(
        kubectl,
        Helm(provider.kubeconfig),
        provider.images,
        node,
        tmp_path_factory.mktemp("stack"),
        settings,
    )
    yield from deployed_for_run(s, pytestconfig.getoption("--e2e-keep"))


@pytest.fixture(scope="session")
def expect(stack: Stack) -> Expectation:
    return Expectation(stack.files.devices(), stack.settings.fraction)


@pytest.fixture
def deployed(stack: Stack, expect: Expectation) -> Stack:
    """The stack as every test starts from it: the default plugin, the chart installed."""
    gpus = len(expect.uuids)
    stack.plugin.deploy(DEFAULT_PLUGIN_ARGS, allocatable=gpus, capacity=gpus)
    stack.watcher.ensure()
    return stack


@pytest.fixture
def gpu_pods(deployed: Stack, request: pytest.FixtureRequest) -> Iterator[GpuPods]:
    """Create GPU pods (`gpu_pods(gpus=1) -> name`); whatever is left is deleted afterwards."""
    created: list[str] = []
    base = request.node.name.split("[")[0].replace("_", "-").lower()[:40].strip("-")

    def create(gpus: int = 1, annotations: dict[str, str] | None = None) -> str:
        name = f"{base}-{len(created)}"
        deployed.workloads.create(name, gpus, annotations)
        created.append(name)
        return name

    yield create
    deployed.workloads.delete(*created)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    timings.TESTS.setdefault(report.nodeid, {})[report.when] = report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in timings.summary():
        terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    # The fixtures' reprs are long; a timeout's diagnostics are what matters.
    if config.option.tbstyle == "auto":
        config.option.tbstyle = "short"
