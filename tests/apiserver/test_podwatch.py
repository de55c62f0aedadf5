"""The pod watch against a real kube-apiserver, with the chart's own RBAC.

The watcher authenticates as the chart's ServiceAccount, from the files the
kubelet would mount and the in-cluster environment, and may do only what
the chart's ClusterRole allows. Pods are created bound to node names, edited
and deleted with kubectl; the API server is paused and restarted under it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from allocwatch.declaredload import GPU_MEMORY, GPU_UTILIZATION, RUNAI_UTILIZATION, DeclaredLoad
from allocwatch.podwatch import PodWatch
from devtools.kubeapiserver import ApiServer
from devtools.waiting import wait_until
from tests.chart.helmtool import Helm
from tests.support.podwatching import DEADLINE, records, served_at_once

GI = 2**30
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")


def pod(name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


def apply(apiserver: ApiServer, namespace: str, *objects: dict[str, Any]) -> None:
    apiserver.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(objects))


def chart_account(
    apiserver: ApiServer, helm: Helm, namespace: str, tmp: Path, *, rbac: bool = True
) -> Path:
    """The chart's ServiceAccount (and, with `rbac`, its ClusterRole and binding),
    applied as helm renders them; returns the directory the kubelet would mount."""
    name = f"aw-{namespace}"
    objects = helm.render(
        {"declaredLoad": {"enabled": True}, "fullnameOverride": name}, "--namespace", namespace
    )
    kinds = RBAC_KINDS if rbac else ("ServiceAccount",)
    apply(apiserver, namespace, *(o for o in objects if o["kind"] in kinds))
    return apiserver.service_account_dir(namespace, name, tmp / "serviceaccount")


@pytest.fixture
def in_cluster(apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(apiserver.port))


@pytest.fixture
def watches() -> Iterator[list[PodWatch]]:
    started: list[PodWatch] = []
    yield started
    for watch in started:
        watch.stop(30)
        assert watch._thread is not None and not watch._thread.is_alive()


def start(watches: list[PodWatch], account: Path, **kwargs: Any) -> PodWatch:
    kwargs = {"watch_seconds": 2, "timeout": 2.0, "max_backoff": 1.0, **kwargs}
    watch = PodWatch("node-a", service_account=account, **kwargs)
    watches.append(watch)
    watch.start()
    return watch


@pytest.mark.usefixtures("in_cluster")
def test_it_follows_pods_bound_to_its_node_with_the_charts_rbac(
    apiserver: ApiServer,
    helm: Helm,
    namespace: str,
    tmp_path: Path,
    watches: list[PodWatch],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "allocwatch.podwatch")
    account = chart_account(apiserver, helm, namespace, tmp_path)
    apply(
        apiserver,
        namespace,
        pod("train", "node-a", {GPU_MEMORY: "75Gi", GPU_UTILIZATION: "95"}),
        pod("infer", "node-a", {GPU_MEMORY: "0.5", RUNAI_UTILIZATION: "20-35"}),
        pod("plain", "node-a"),
        pod("elsewhere", "node-b", {GPU_MEMORY: "1Gi"}),
        pod("bad", "node-a", {GPU_MEMORY: "lots"}),
    )
    rejected: list[str] = []
    watch = start(watches, account, on_rejected=rejected.append)
    expected = {
        (namespace, "train"): DeclaredLoad(memory_bytes=75 * GI, utilization=(95, 95)),
        (namespace, "infer"): DeclaredLoad(memory_fraction=0.5, utilization=(20, 35)),
    }
    wait_until(lambda: watch.loads() == expected, DEADLINE, "the listed pods")
    assert watch.health().current
    # the snapshot is published before the problems are logged and counted
    wait_until(lambda: rejected, DEADLINE, "the count")
    assert rejected == [GPU_MEMORY]
    assert len(records(caplog, f"pod {namespace}/bad: {GPU_MEMORY}='lots'")) == 1

    apiserver.kubectl("annotate", "-n", namespace, "pod/train", f"{GPU_MEMORY}=30Gi",
                      f"{GPU_UTILIZATION}=40", "--overwrite")  # fmt: skip
    wait_until(
        lambda: watch.loads().get((namespace, "train")) == DeclaredLoad(30 * GI, None, (40, 40)),
        DEADLINE,
        "an edited annotation",
    )
    apiserver.kubectl("annotate", "-n", namespace, "pod/infer", f"{GPU_MEMORY}-",
                      f"{RUNAI_UTILIZATION}-")  # fmt: skip
    wait_until(lambda: (namespace, "infer") not in watch.loads(), DEADLINE, "removed annotations")
    apply(apiserver, namespace, pod("late", "node-a", {GPU_UTILIZATION: "0"}))
    wait_until(lambda: (namespace, "late") in watch.loads(), DEADLINE, "a new pod")
    apiserver.kubectl("delete", "-n", namespace, "pod/train", "--grace-period=0", "--force")
    wait_until(lambda: (namespace, "train") not in watch.loads(), DEADLINE, "a deleted pod")
    assert watch.loads() == {(namespace, "late"): DeclaredLoad(utilization=(0, 0))}
    # an unrelated change to the bad pod does not log it again
    apiserver.kubectl("label", "-n", namespace, "pod/bad", "x=y")
    apiserver.kubectl("annotate", "-n", namespace, "pod/bad", f"{GPU_MEMORY}=-5Gi", "--overwrite")
    wait_until(lambda: len(rejected) == 2, DEADLINE, "the changed bad value")
    assert len(records(caplog, f"pod {namespace}/bad:")) == 2
    assert watch.health().current


@pytest.mark.usefixtures("in_cluster")
def test_without_the_charts_rbac_it_is_stale_and_harmless(
    apiserver: ApiServer, helm: Helm, namespace: str, tmp_path: Path, watches: list[PodWatch]
) -> None:
    account = chart_account(apiserver, helm, namespace, tmp_path, rbac=False)
    apply(apiserver, namespace, pod("train", "node-a", {GPU_MEMORY: "75Gi"}))
    watch = start(watches, account)
    health = wait_until(
        lambda: watch.health().error != "not listed yet" and watch.health(), DEADLINE, ""
    )
    assert not health.current
    assert "403" in (health.error or "") or "forbidden" in (health.error or "")
    assert watch.loads() == {}


@pytest.mark.usefixtures("in_cluster")
def test_a_paused_api_server_makes_it_stale_and_it_recovers(
    apiserver: ApiServer, helm: Helm, namespace: str, tmp_path: Path, watches: list[PodWatch]
) -> None:
    account = chart_account(apiserver, helm, namespace, tmp_path)
    apply(apiserver, namespace, pod("train", "node-a", {GPU_MEMORY: "75Gi"}))
    watch = start(watches, account)
    wait_until(lambda: (namespace, "train") in watch.loads(), DEADLINE, "the listed pod")
    before = watch.loads()
    apiserver.pause()
    try:
        health = wait_until(
            lambda: not watch.health().current and watch.health(), DEADLINE, "stale"
        )
        assert "Timeout" in (health.error or "")
        assert served_at_once(watch)[0] is before
    finally:
        apiserver.resume()
    wait_until(lambda: watch.health().current, DEADLINE, "current again")
    apiserver.kubectl("annotate", "-n", namespace, "pod/train", f"{GPU_MEMORY}=1Gi", "--overwrite")
    wait_until(
        lambda: watch.loads().get((namespace, "train")) == DeclaredLoad(memory_bytes=GI),
        DEADLINE,
        "an edit after the pause",
    )


@pytest.mark.usefixtures("in_cluster")
def test_a_restarted_api_server_makes_it_stale_and_a_relist_catches_up(
    apiserver: ApiServer, helm: Helm, namespace: str, tmp_path: Path, watches: list[PodWatch]
) -> None:
    account = chart_account(apiserver, helm, namespace, tmp_path)
    apply(apiserver, namespace, pod("train", "node-a", {GPU_MEMORY: "75Gi"}))
    watch = start(watches, account)
    wait_until(lambda: (namespace, "train") in watch.loads(), DEADLINE, "the listed pod")
    apiserver.kill()
    try:
        wait_until(
            lambda: not watch.health().current, DEADLINE, "stale while the API server is down"
        )
        assert watch.loads() == {(namespace, "train"): DeclaredLoad(memory_bytes=75 * GI)}
    finally:
        apiserver.start()
    wait_until(lambda: watch.health().current, DEADLINE, "current again")
    apply(apiserver, namespace, pod("late", "node-a", {GPU_UTILIZATION: "50"}))
    wait_until(
        lambda: (namespace, "late") in watch.loads(), DEADLINE, "a pod created after the restart"
    )
