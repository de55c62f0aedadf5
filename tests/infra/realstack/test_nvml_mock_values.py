"""nvml-mock's own chart, from the pinned upstream tarball, with the real stack's values.

The values must turn off every feature that needs something this offline
cluster lacks, and hack/realstack/render-chart.py must hand setup.sh exactly
what the chart gives nvml-mock's pod.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.helmtool import REPO_ROOT, Helm, helm_binary

# The pin lives once, in hack/upstream/VERSION.
PIN = dict(
    line.split("=", 1)
    for line in (REPO_ROOT / "hack" / "upstream" / "VERSION").read_text().splitlines()
    if line and not line.startswith("#")
)
TARBALL = REPO_ROOT.parent / "shared" / "upstream" / PIN["tarball"]
TARBALL_SHA256 = PIN["tarball_sha256"]
CHART_IN_TARBALL = PIN["tarball"].removesuffix(".tar.gz") + "/deployments/nvml-mock/helm/nvml-mock"
VALUES = REPO_ROOT / "e2e" / "realstack" / "nvml-mock-values.yaml"
RENDER_CHART = REPO_ROOT / "hack" / "realstack" / "render-chart.py"


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TARBALL.is_file():
        pytest.fail(f"{TARBALL} is missing: the pinned upstream tarball sits beside the repository")
    assert hashlib.sha256(TARBALL.read_bytes()).hexdigest() == TARBALL_SHA256
    out = tmp_path_factory.mktemp("upstream")
    with tarfile.open(TARBALL) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(CHART_IN_TARBALL + "/")]
        tar.extractall(out, members=members, filter="data")
    return out / CHART_IN_TARBALL


@pytest.fixture(scope="module")
def rendered(chart: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    helm = Helm(helm_binary(), tmp_path_factory.mktemp("helm"))
    result = helm.run(
        "template", "nvml-mock", str(chart), "-f", str(VALUES), "--set", "image.tag=t"
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def objects(rendered: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def daemonsets(rendered: str) -> dict[str, dict[str, Any]]:
    """The DaemonSets by component (daemon, nri)."""
    return {
        o["metadata"]["labels"]["app.kubernetes.io/component"]: o
        for o in objects(rendered)
        if o["kind"] == "DaemonSet"
    }


def daemonset_container(rendered: str, component: str = "daemon") -> dict[str, Any]:
    ds = daemonsets(rendered)[component]
    containers: list[dict[str, Any]] = ds["spec"]["template"]["spec"]["containers"]
    return containers[0] | {"count": len(containers)}


def env(rendered: str) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in daemonset_container(rendered)["env"]}


def test_the_daemon_and_nri_plugin_and_nothing_that_needs_a_network_peer(rendered: str) -> None:
    kinds = sorted(o["kind"] for o in objects(rendered))
    # No ibping Service or NetworkPolicy, no control plane.
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
        "DaemonSet",
        "ServiceAccount",
    ]
    assert set(daemonsets(rendered)) == {"daemon", "nri"}


def test_the_nri_plugin_gives_workloads_the_mock_driver(rendered: str) -> None:
    """GPU pods get nvidia-smi, the library and the profile from nvml-mock's NRI plugin:
    the device plugin, run as upstream runs it, passes only the device nodes."""
    args = daemonset_container(rendered, "nri")["args"]
    assert "--overlay-host-path=/var/lib/nvml-mock" in args
    assert "--overlay-mount-path=/opt/nvml-mock" in args
    assert "--socket-path=/var/run/nri/nri.sock" in args


def test_allocwatch_is_the_only_writer_of_readings(rendered: str) -> None:
    assert daemonset_container(rendered)["count"] == 1


def test_offline_features_are_off(rendered: str) -> None:
    values = env(rendered)
    assert values["MOCK_IB"] == "off"
    assert values["MOCK_NFD_PCI_LABEL"] == "off"
    assert "MOCK_FABRICMANAGER" not in values
    assert "IMEX_MOCK_CHANNELS" not in values


def test_the_locally_built_image_is_never_pulled(rendered: str) -> None:
    for component in ("daemon", "nri"):
        container = daemonset_container(rendered, component)
        assert container["image"] == "localhost/nvml-mock:t"
        assert container["imagePullPolicy"] == "Never"


def test_a_small_profile(rendered: str) -> None:
    assert env(rendered)["GPU_COUNT"] == "4"


def test_render_chart_hands_setup_the_pods_inputs(rendered: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    proc = subprocess.run(
        [sys.executable, str(RENDER_CHART), str(config)],
        input=rendered,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert "GPU_COUNT=4" in lines
    assert "MOCK_IB=off" in lines
    assert "MOCK_NVML_CONFIG=/etc/nvml-mock/config.yaml" in lines
    profile = yaml.safe_load(config.read_text())
    assert [d["index"] for d in profile["devices"]] == [0, 1, 2, 3]
    assert profile["device_defaults"]["name"] == "NVIDIA T4"


def test_render_chart_refuses_input_without_nvml_mock(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(RENDER_CHART), str(tmp_path / "config.yaml")],
        input="kind: ConfigMap\nmetadata: {name: other}\ndata: {}\n",
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "no nvml-mock ConfigMap or DaemonSet" in proc.stderr
