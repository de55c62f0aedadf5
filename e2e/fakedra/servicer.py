"""The two gRPC services the kubelet calls: plugin registration and DRAPlugin."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from e2e.kubeletapi.dra.v1 import api_pb2 as dra_pb2
from e2e.kubeletapi.dra.v1 import api_pb2_grpc as dra_grpc
from e2e.kubeletapi.pluginregistration.v1 import api_pb2 as reg_pb2
from e2e.kubeletapi.pluginregistration.v1 import api_pb2_grpc as reg_grpc

from .kubeapi import ApiError, KubeApi
from .resources import claim_path

log = logging.getLogger("fakedra")

PLUGIN_TYPE = "DRAPlugin"
SUPPORTED_VERSIONS = ["v1.DRAPlugin"]


class RegistrationServicer(reg_grpc.RegistrationServicer):
    """Tells the kubelet who we are; `on_registered` runs after each successful registration."""

    def __init__(self, driver: str, endpoint: str, on_registered: Callable[[], None]) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.on_registered = on_registered

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        log.info("GetInfo: %s at %s", self.driver, self.endpoint)
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE,
            name=self.driver,
            endpoint=self.endpoint,
            supported_versions=SUPPORTED_VERSIONS,
        )

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.plugin_registered:
            log.info("registered with the kubelet as %s", self.driver)
            self.on_registered()
        else:
            log.error("the kubelet refused the registration: %s", request.error)
        return reg_pb2.RegistrationStatusResponse()


def allocated_devices(claim: Any, driver: str) -> list[Any]:
    """The allocation results of `claim` that belong to `driver`, as prepared devices.

    No CDI ids: the runtimes the e2e tests run on have no CDI, and the kubelet
    would hand unknown ids to the runtime.
    """
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    devices = []
    for result in results:
        if result.get("driver") != driver:
            continue
        device = dra_pb2.Device(
            request_names=[result["request"]] if result.get("request") else [],
            pool_name=result.get("pool", ""),
            device_name=result.get("device", ""),
        )
        if result.get("shareID"):
            device.share_id = result["shareID"]
        devices.append(device)
    return devices


class DraServicer(dra_grpc.DRAPluginServicer):
    def __init__(self, api: KubeApi, driver: str) -> None:
        self.api = api
        self.driver = driver

    def _prepare(self, claim: Any) -> Any:
        what = f"ResourceClaim {claim.namespace}/{claim.name}"
        try:
            obj = self.api.get(claim_path(claim.namespace, claim.name))
        except ApiError as exc:
            return dra_pb2.NodePrepareResourceResponse(error=f"reading {what}: {exc}")
        if obj is None:
            return dra_pb2.NodePrepareResourceResponse(error=f"{what} not found")
        uid = obj.get("metadata", {}).get("uid")
        if uid != claim.uid:
            return dra_pb2.NodePrepareResourceResponse(
                error=f"{what} has uid {uid}, not {claim.uid}"
            )
        if not (obj.get("status") or {}).get("allocation"):
            return dra_pb2.NodePrepareResourceResponse(error=f"{what} is not allocated")
        devices = allocated_devices(obj, self.driver)
        log.info(
            "prepared %s (%s): %s",
            what,
            claim.uid,
            ", ".join(f"{d.pool_name}/{d.device_name}" for d in devices) or "no devices of ours",
        )
        return dra_pb2.NodePrepareResourceResponse(devices=devices)

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = dra_pb2.NodePrepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].CopyFrom(self._prepare(claim))
        return response

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Preparing left nothing on the node, so there is nothing to undo.
        response = dra_pb2.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            log.info("unprepared ResourceClaim %s/%s (%s)", claim.namespace, claim.name, claim.uid)
            response.claims[claim.uid].CopyFrom(dra_pb2.NodeUnprepareResourceResponse())
        return response
