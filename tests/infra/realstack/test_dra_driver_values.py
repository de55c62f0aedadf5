"""NVIDIA's DRA driver's own chart, from the pinned tarball, with the real stack's values.

e2e/realstack/dra-driver-values.yaml must give the chart what nvml-mock's
driver root needs and turn compute domains off, so that it runs the GPU
kubelet plugin alone, from the locally built image.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.helmtool import REPO_ROOT, Helm, helm_binary

PIN = dict(
    line.split("=", 1)
    for line in (REPO_ROOT / "hack" / "upstream" / "dra-driver.version").read_text().splitlines()
    if line and not line.startswith("#")
)
TARBALL = REPO_ROOT.parent / "shared" / "upstream" / PIN["tarball"]
CHART_IN_TARBALL = (
    PIN["tarball"].removesuffix(".tar.gz") + "/deployments/helm/dra-driver-nvidia-gpu"
)
VALUES = REPO_ROOT / "e2e" / "realstack" / "dra-driver-values.yaml"
DRIVER_ROOT = "/var/lib/nvml-mock/driver"


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TARBALL.is_file():
        pytest.fail(
            f"{TARBALL} is missing: the pinned DRA driver tarball sits beside the repository"
        )
    assert hashlib.sha256(TARBALL.read_bytes()).hexdigest() == PIN["tarball_sha256"]
    out = tmp_path_factory.mktemp("dra-driver")
    with tarfile.open(TARBALL) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(CHART_IN_TARBALL + "/")]
        tar.extractall(out, members=members, filter="data")
    return out / CHART_IN_TARBALL


def render(chart: Path, tmp: Path, *args: str) -> list[dict[str, Any]]:
    helm = Helm(helm_binary(), tmp)
    result = helm.run(
        "template", "nvidia-dra-driver", str(chart), "--namespace", "nvidia",
        "--api-versions", "resource.k8s.io/v1", "-f", str(VALUES),
        "--set", "image.tag=t", *args,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def objects(chart: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return render(chart, tmp_path_factory.mktemp("helm"))


def plugin_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def test_the_gpu_kubelet_plugin_alone(objects: list[dict[str, Any]]) -> None:
    """No compute-domain controller, plugin or DeviceClass; no webhook."""
    kinds = sorted(o["kind"] for o in objects)
    assert "Deployment" not in kinds
    assert kinds.count("DaemonSet") == 1
    pod = plugin_pod(objects)
    assert [c["name"] for c in pod["containers"]] == ["gpus"]
    assert [c["name"] for c in pod["initContainers"]] == ["init-container"]
    classes = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "DeviceClass")
    assert "gpu.nvidia.com" in classes
    assert not [c for c in classes if "compute-domain" in c]


def test_the_plugin_reads_nvml_mocks_driver_root(objects: list[dict[str, Any]]) -> None:
    pod = plugin_pod(objects)
    for container in pod["initContainers"] + pod["containers"]:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["NVIDIA_DRIVER_ROOT"] == DRIVER_ROOT, container["name"]
    volumes = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    assert volumes["driver-root"] == DRIVER_ROOT
    assert volumes["driver-root-parent"] == "/var/lib/nvml-mock"


def test_it_runs_where_nvml_mock_labels_the_node(objects: list[dict[str, Any]]) -> None:
    """nvml-mock's setup.sh sets nvidia.com/gpu.present=true; nothing here runs NFD."""
    terms = plugin_pod(objects)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    wanted = {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
    assert [wanted] in [t["matchExpressions"] for t in terms]


def test_the_locally_built_image_is_never_pulled(objects: list[dict[str, Any]]) -> None:
    pod = plugin_pod(objects)
    (gpus,) = pod["containers"]
    assert gpus["image"] == "localhost/dra-driver-nvidia-gpu:t"
    assert gpus["imagePullPolicy"] == "Never"
    assert pod["initContainers"][0]["image"] == "localhost/dra-driver-nvidia-gpu:t"


def test_without_the_override_the_chart_refuses_gpus(chart: Path, tmp_path: Path) -> None:
    """The values' gpuResourcesEnabledOverride is what lets the chart run GPUs at all."""
    helm = Helm(helm_binary(), tmp_path)
    result = helm.run(
        "template", "x", str(chart), "--namespace", "nvidia",
        "--api-versions", "resource.k8s.io/v1", "-f", str(VALUES),
        "--set", "gpuResourcesEnabledOverride=false",
    )  # fmt: skip
    assert result.returncode != 0
    assert "gpuResourcesEnabledOverride=true" in result.stderr
