"""The GPU pod manifest both e2e stacks start their workloads from."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import yaml

from e2e.framework.manifests import render

POD = dict(name="p", namespace="e2e", node="node-a", image="img:1", resource_name="nvidia.com/gpu")


def pod(**extra: Any) -> Any:
    doc = yaml.safe_load(render("gpu-pod.yaml.j2", **POD, **extra))
    kubernetes_validate.validate(doc, "1.35.0", strict=True)
    return doc["spec"]["containers"][0]


def test_by_default_it_prints_its_devices_and_holds_them() -> None:
    container = pod(gpus=2)
    assert container["command"] == ["python3", "-c"]
    assert "NVIDIA_VISIBLE_DEVICES=" in container["args"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 2}}


def test_a_given_command_replaces_the_loop_and_no_gpus_requests_none() -> None:
    container = pod(gpus=0, command=["sh", "-c", "sleep infinity"])
    assert container["command"] == ["sh", "-c", "sleep infinity"]
    assert "args" not in container and "resources" not in container


def test_annotations_are_the_pods_own() -> None:
    notes = {"allocwatch.dev/gpu-memory": "2Gi", "allocwatch.dev/gpu-utilization": "40"}
    annotated = yaml.safe_load(render("gpu-pod.yaml.j2", **POD, gpus=1, annotations=notes))
    kubernetes_validate.validate(annotated, "1.35.0", strict=True)
    assert annotated["metadata"]["annotations"] == notes
    plain = yaml.safe_load(render("gpu-pod.yaml.j2", **POD, gpus=1))
    assert "annotations" not in plain["metadata"]
