"""The pods a fake kubelet lists, as JSON-able dicts, and their List response."""

from __future__ import annotations

from typing import Any

from allocwatch.kubeletapi.podresources.v1 import api_pb2


def gpu_pod(
    namespace: str,
    name: str,
    device_ids: list[str],
    resource: str = "nvidia.com/gpu",
    container: str = "main",
) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "name": name,
        "containers": [
            {"name": container, "devices": [{"resource_name": resource, "device_ids": device_ids}]}
        ],
    }


def dra_resource(
    device: str,
    driver: str = "gpu.nvidia.com",
    pool: str = "node-1",
    cdi_devices: list[str] | None = None,
    share_id: str | None = None,
) -> dict[str, Any]:
    """One `ClaimResource`: a device of a DRA driver (empty names as old kubelets send)."""
    resource: dict[str, Any] = {
        "driver_name": driver,
        "pool_name": pool,
        "device_name": device,
        "cdi_devices": cdi_devices or [],
    }
    if share_id is not None:
        resource["share_id"] = share_id
    return resource


def dra_pod(
    namespace: str,
    name: str,
    claim: str,
    resources: list[dict[str, Any]],
    container: str = "main",
    claim_namespace: str | None = None,
) -> dict[str, Any]:
    """A pod whose container holds one ResourceClaim with `resources` (dra_resource)."""
    dynamic = {
        "claim_name": claim,
        "claim_namespace": namespace if claim_namespace is None else claim_namespace,
        "claim_resources": resources,
    }
    return {
        "namespace": namespace,
        "name": name,
        "containers": [{"name": container, "dynamic_resources": [dynamic]}],
    }


def build_response(pods: list[dict[str, Any]]) -> api_pb2.ListPodResourcesResponse:
    resp = api_pb2.ListPodResourcesResponse()
    for pod in pods:
        p = resp.pod_resources.add(name=pod["name"], namespace=pod["namespace"])
        for container in pod.get("containers", []):
            c = p.containers.add(name=container["name"])
            for dev in container.get("devices", []):
                c.devices.add(resource_name=dev["resource_name"], device_ids=dev["device_ids"])
            for dynamic in container.get("dynamic_resources", []):
                d = c.dynamic_resources.add(
                    claim_name=dynamic["claim_name"], claim_namespace=dynamic["claim_namespace"]
                )
                for res in dynamic.get("claim_resources", []):
                    r = d.claim_resources.add(
                        driver_name=res.get("driver_name", ""),
                        pool_name=res.get("pool_name", ""),
                        device_name=res.get("device_name", ""),
                    )
                    for cdi in res.get("cdi_devices", []):
                        r.cdi_devices.add(name=cdi)
                    if res.get("share_id") is not None:
                        r.share_id = res["share_id"]
    return resp
