"""The fake DRA plugin's manifests render to valid Kubernetes 1.35 objects."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from e2e.framework.manifests import render

KUBE_VERSION = "1.35.0"
PLUGIN = dict(
    namespace="e2e",
    node="node-a",
    image="localhost/fakedra:1",
    nvml_mock_root="/var/lib/nvml-mock",
    kubelet_root="/var/lib/kubelet",
    args=["--driver", "gpu.nvidia.com"],
)


def documents(text: str) -> list[Any]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    return docs


def plugin_pod(**extra: Any) -> Any:
    docs = {d["kind"]: d for d in documents(render("fakedra.yaml.j2", **PLUGIN, **extra))}
    assert set(docs) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"}
    return docs


def test_plugin_mounts_the_kubelet_plugin_directories_and_may_publish() -> None:
    docs = plugin_pod()
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod
    (container,) = pod["containers"]
    assert container["args"][-2:] == ["--driver", "gpu.nvidia.com"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins"} <= mounts
    assert pod["serviceAccountName"] == "fakedra"
    rules = {(r["resources"][0], verb) for r in docs["ClusterRole"]["rules"] for verb in r["verbs"]}
    assert rules == {
        ("resourceclaims", "get"),
        ("resourceslices", "get"),
        ("resourceslices", "create"),
        ("resourceslices", "update"),
        ("deviceclasses", "get"),
        ("deviceclasses", "create"),
    }


@pytest.mark.parametrize("as_template", [False, True])
def test_claims_ask_for_gpus_of_the_driver_class(as_template: bool) -> None:
    (doc,) = documents(
        render(
            "fakedra-claim.yaml.j2",
            name="c",
            namespace="e2e",
            driver="gpu.nvidia.com",
            gpus=2,
            uuid="GPU-x",
            as_template=as_template,
        )
    )
    assert doc["kind"] == ("ResourceClaimTemplate" if as_template else "ResourceClaim")
    spec = doc["spec"]["spec"] if as_template else doc["spec"]
    (request,) = spec["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert request["exactly"]["count"] == 2
    assert request["exactly"]["selectors"] == [
        {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].uuid == "GPU-x"'}}
    ]


@pytest.mark.parametrize(
    ("key", "field"),
    [("claim", "resourceClaimName"), ("claim_template", "resourceClaimTemplateName")],
)
def test_pod_references_its_claim(key: str, field: str) -> None:
    (pod,) = documents(
        render(
            "fakedra-pod.yaml.j2",
            name="p",
            namespace="e2e",
            node="node-a",
            image="img:1",
            command=["sleep", "3600"],
            **{key: "gpus-c"},
        )
    )
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", field: "gpus-c"}]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpus"}]
