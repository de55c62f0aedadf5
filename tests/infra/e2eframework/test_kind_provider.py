"""The kind provider reaches its node through the runtime kind runs it on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from e2e.framework.manifests import render
from e2e.framework.providers import KindProvider, ProviderUnavailable

NODE = "allocwatch-e2e-control-plane"


def recorder(directory: Path, name: str) -> Path:
    """An executable NAME that appends its arguments to NAME.log."""
    path = directory / name
    path.write_text(f'#!/bin/sh\necho "$@" >>"{directory / name}.log"\n')
    path.chmod(0o755)
    return path


def test_the_kubelet_restarts_through_docker_by_default(tmp_path: Path) -> None:
    docker = recorder(tmp_path, "docker")
    provider = KindProvider(env={"DOCKER": str(docker), "PATH": str(tmp_path)})
    provider.restart_kubelet(NODE)
    assert (tmp_path / "docker.log").read_text() == f"exec {NODE} systemctl restart kubelet\n"


def test_the_kubelet_restarts_through_kinds_node_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder(tmp_path, "nerdctl")
    docker = recorder(tmp_path, "docker")
    monkeypatch.setenv("PATH", str(tmp_path))
    provider = KindProvider(env={"DOCKER": str(docker), "KIND_EXPERIMENTAL_PROVIDER": "nerdctl"})
    provider.restart_kubelet(NODE)
    assert (tmp_path / "nerdctl.log").read_text() == f"exec {NODE} systemctl restart kubelet\n"
    assert not (tmp_path / "docker.log").exists()


def test_the_api_server_stops_and_returns_through_its_static_pod_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node runtime moves the manifest; the API server reads unready until it is back."""
    stopped = tmp_path / "stopped"
    runtime = tmp_path / "nerdctl"
    runtime.write_text(
        f'#!/bin/sh\necho "$@" >>"{tmp_path}/nerdctl.log"\n'
        f'case "$4" in /etc/kubernetes/manifests/*) touch "{stopped}";; *) rm "{stopped}";; esac\n'
    )
    runtime.chmod(0o755)
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\n! test -e "{stopped}"\n')
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")  # theirs: touch, rm
    provider = KindProvider(
        cluster_name="allocwatch-e2e",
        kubectl_bin=str(kubectl),
        env={"KIND_EXPERIMENTAL_PROVIDER": "nerdctl"},
    )
    provider.kubeconfig = tmp_path / "kubeconfig"
    assert provider.api_server_stop_unsupported() is None
    with provider.api_server_stopped():
        assert stopped.exists()
        assert not provider._api_server_ready()
    assert provider._api_server_ready()
    manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
    parked = "/etc/kubernetes/kube-apiserver.yaml.stopped"
    assert (tmp_path / "nerdctl.log").read_text() == (
        f"exec {NODE} mv {manifest} {parked}\nexec {NODE} mv {parked} {manifest}\n"
    )


def test_a_missing_node_runtime_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = {name: str(recorder(tmp_path, name)) for name in ("kind", "kubectl", "docker", "helm")}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    provider = KindProvider(
        kind_bin=tools["kind"],
        kubectl_bin=tools["kubectl"],
        env={
            "DOCKER": tools["docker"],
            "HELM": tools["helm"],
            "KIND_EXPERIMENTAL_PROVIDER": "nerdctl",
        },
    )
    with pytest.raises(ProviderUnavailable, match=r"kind provider: nerdctl not found"):
        provider._check_tools()


def test_the_kind_config_lets_the_kubelet_run_on_cgroup_v1() -> None:
    config = yaml.safe_load(render("kind-config.yaml.j2"))
    patches = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]]
    assert {"kind": "KubeletConfiguration", "failCgroupV1": False} in patches
    assert [n["role"] for n in config["nodes"]] == ["control-plane"]


def test_the_kind_config_runs_the_control_plane_without_leader_election() -> None:
    config = yaml.safe_load(render("kind-config.yaml.j2"))
    (cluster,) = [
        p for p in map(yaml.safe_load, config["kubeadmConfigPatches"])
        if p["kind"] == "ClusterConfiguration"
    ]  # fmt: skip
    for component in ("controllerManager", "scheduler"):
        assert cluster[component]["extraArgs"] == {"leader-elect": "false"}
