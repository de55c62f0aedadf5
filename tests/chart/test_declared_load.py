"""declaredLoad.enabled: the account, RBAC, token and node name the pod watch needs, and
nothing at all when off."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart.helmtool import CHART, NAMESPACE, RELEASE, Helm, container, only

ON = {"declaredLoad": {"enabled": True}}
NAME = f"{RELEASE}-allocwatch"
NODE_NAME = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
EVERYTHING = CHART / "ci" / "everything-values.yaml"


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = only(objects, "DaemonSet")["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    "extra",
    [(), ("-f", str(EVERYTHING)), ("--set", "metrics.serviceMonitor.enabled=true")],
    ids=["defaults", "everything", "service-monitor"],
)
def test_off_renders_exactly_what_the_default_does(helm: Helm, extra: tuple[str, ...]) -> None:
    default = helm.template(None, *extra)
    off = helm.template(None, *extra, "--set", "declaredLoad.enabled=false")
    assert default.returncode == 0 and off.returncode == 0, default.stderr + off.stderr
    assert off.stdout == default.stdout


def test_off_mounts_no_token_and_creates_no_account(helm: Helm) -> None:
    objects = helm.render()
    assert [o["kind"] for o in objects] == ["DaemonSet"]
    spec = pod_spec(objects)
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "default"  # named, not left out: see the template
    c = container(objects)
    assert "--declared-load" not in c["args"]
    assert all(e["name"] != "NODE_NAME" for e in c["env"])


def test_on_adds_the_account_the_rbac_the_token_and_the_node_name(helm: Helm) -> None:
    objects = helm.render(ON)
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
    ]
    account = only(objects, "ServiceAccount")
    assert account["metadata"] == {
        "name": NAME,
        "namespace": NAMESPACE,
        "labels": account["metadata"]["labels"],
    }
    role = only(objects, "ClusterRole")
    assert role["metadata"]["name"] == NAME
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    ], "pods, read only: nothing else"
    binding = only(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": NAME,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    spec = pod_spec(objects)
    assert spec["serviceAccountName"] == NAME
    assert spec["automountServiceAccountToken"] is True
    c = container(objects)
    assert c["args"].count("--declared-load") == 1
    assert c["env"].count(NODE_NAME) == 1
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_on_changes_nothing_else_in_the_daemonset(helm: Helm) -> None:
    off = only(helm.render(), "DaemonSet")
    on = copy.deepcopy(only(helm.render(ON), "DaemonSet"))
    spec = on["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == NAME
    spec["serviceAccountName"] = "default"
    spec["automountServiceAccountToken"] = False
    c = spec["containers"][0]
    c["args"].remove("--declared-load")
    c["env"].remove(NODE_NAME)
    assert on == off


def test_the_release_namespace_and_names_follow_the_release(helm: Helm) -> None:
    objects = helm.render({**ON, "fullnameOverride": "gpu-watch"}, "--namespace", "other")
    account = only(objects, "ServiceAccount")["metadata"]
    assert (account["name"], account["namespace"]) == ("gpu-watch", "other")
    assert only(objects, "ClusterRole")["metadata"]["name"] == "gpu-watch"
    binding = only(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "gpu-watch"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-watch", "namespace": "other"}
    ]
    assert pod_spec(objects)["serviceAccountName"] == "gpu-watch"
