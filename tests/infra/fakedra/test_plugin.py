"""The plugin process against a fake kubelet and a fake API server, over real sockets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devtools.waiting import wait_until
from tests.infra.fakedra.conftest import (
    DEVICE_CLASS,
    DRIVER,
    NODE,
    RESOURCE,
    SLICE,
    UUIDS,
    ApiServer,
    PluginProcess,
)
from tests.infra.fakedra.pluginwatcher import FakePluginWatcher
from tests.support import REPO_ROOT, START_SECONDS

pytestmark = pytest.mark.timing

StartPlugin = Callable[..., PluginProcess]
CLAIMS = f"{RESOURCE}/namespaces/ns/resourceclaims"


def claim(name: str, results: list[dict[str, Any]] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"}}
    if results is not None:
        obj["status"] = {"allocation": {"devices": {"results": results}}}
    return obj


def result(device: str, driver: str = DRIVER, request: str = "gpu", **extra: str) -> Any:
    return {"request": request, "driver": driver, "pool": NODE, "device": device, **extra}


def test_registers_as_a_dra_plugin(
    kubelet: FakePluginWatcher, start_plugin: StartPlugin, root: Path
) -> None:
    plugin = start_plugin()
    reg = kubelet.register()
    assert reg.socket == root / "plugins_registry" / f"{DRIVER}-reg.sock"
    assert reg.info.type == "DRAPlugin"
    assert reg.info.name == DRIVER
    assert reg.info.endpoint == str(root / "plugins" / DRIVER / "dra.sock")
    assert list(reg.info.supported_versions) == ["v1.DRAPlugin"]
    wait_until(
        lambda: "registered with the kubelet" in plugin.log(), START_SECONDS, what="the log line"
    )
    kubelet.refuse("no such version")
    wait_until(lambda: "refused the registration: no such version" in plugin.log(), START_SECONDS)


def test_publishes_the_profile_as_a_slice_and_a_device_class(
    apiserver: ApiServer, start_plugin: StartPlugin
) -> None:
    start_plugin()
    published = wait_until(lambda: apiserver.get(SLICE), START_SECONDS, what="the ResourceSlice")
    spec = published["spec"]
    assert spec["driver"] == DRIVER
    assert spec["nodeName"] == NODE
    assert spec["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert [(d["name"], d["attributes"]["uuid"]["string"]) for d in spec["devices"]] == [
        (f"gpu-{i}", UUIDS[i]) for i in range(4)
    ]
    cls = wait_until(lambda: apiserver.get(DEVICE_CLASS), START_SECONDS, what="the DeviceClass")
    assert cls["spec"]["selectors"][0]["cel"]["expression"] == f'device.driver == "{DRIVER}"'


def test_replaces_a_stale_slice_with_the_next_generation(
    apiserver: ApiServer, start_plugin: StartPlugin
) -> None:
    stale = {
        "metadata": {"name": f"{NODE}-{DRIVER}"},
        "spec": {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 4},
                 "devices": [{"name": "gpu-9", "attributes": {}}]},
    }  # fmt: skip
    apiserver.create(f"{RESOURCE}/resourceslices", stale)
    start_plugin()
    published = wait_until(
        lambda: (s := apiserver.get(SLICE)) and len(s["spec"]["devices"]) == 4 and s,
        START_SECONDS,
        what="the updated slice",
    )
    assert published["spec"]["pool"]["generation"] == 5


def test_publishes_again_after_each_registration(
    apiserver: ApiServer, kubelet: FakePluginWatcher, start_plugin: StartPlugin
) -> None:
    # no resync within the test: only a registration can bring the slice back
    plugin = start_plugin("--resync-interval", "3600")
    wait_until(lambda: apiserver.get(SLICE), START_SECONDS, what="the first slice")
    kubelet.register()
    assert apiserver.delete(SLICE) is not None  # what a starting kubelet does
    kubelet.register()
    wait_until(lambda: apiserver.get(SLICE), START_SECONDS, what="the slice after re-registration")
    assert plugin.log().count("created ResourceSlice") == 2


def test_resync_repairs_a_deleted_slice(apiserver: ApiServer, start_plugin: StartPlugin) -> None:
    start_plugin("--resync-interval", "0.2")
    wait_until(lambda: apiserver.get(SLICE), START_SECONDS, what="the first slice")
    apiserver.delete(SLICE)
    wait_until(lambda: apiserver.get(SLICE), START_SECONDS, what="the repaired slice")


def test_prepare_answers_our_devices_without_cdi_ids(
    apiserver: ApiServer, kubelet: FakePluginWatcher, start_plugin: StartPlugin
) -> None:
    start_plugin()
    both = apiserver.create(
        CLAIMS,
        claim(
            "both",
            [
                result("gpu-2"),
                result("nic-0", driver="net.example.com"),
                result("gpu-0", request="gpu/full", shareID="8a0b8e0c-1d5d-4b55-a41f-a0e1c5c1c3a2"),
            ],
        ),
    )
    other = apiserver.create(CLAIMS, claim("other", [result("nic-1", driver="net.example.com")]))
    reg = kubelet.register()
    response = reg.prepare(
        ("ns", both["metadata"]["uid"], "both"), ("ns", other["metadata"]["uid"], "other")
    )
    assert set(response.claims) == {both["metadata"]["uid"], other["metadata"]["uid"]}
    answer = response.claims[both["metadata"]["uid"]]
    assert answer.error == ""
    assert [(d.pool_name, d.device_name, list(d.request_names)) for d in answer.devices] == [
        (NODE, "gpu-2", ["gpu"]),
        (NODE, "gpu-0", ["gpu/full"]),
    ]
    assert [list(d.cdi_device_ids) for d in answer.devices] == [[], []]
    assert not answer.devices[0].HasField("share_id")
    assert answer.devices[1].share_id == "8a0b8e0c-1d5d-4b55-a41f-a0e1c5c1c3a2"
    assert list(response.claims[other["metadata"]["uid"]].devices) == []
    assert response.claims[other["metadata"]["uid"]].error == ""

    unprepared = reg.unprepare(("ns", both["metadata"]["uid"], "both"))
    assert set(unprepared.claims) == {both["metadata"]["uid"]}
    assert unprepared.claims[both["metadata"]["uid"]].error == ""


def test_prepare_reports_each_bad_claim_on_its_own(
    apiserver: ApiServer, kubelet: FakePluginWatcher, start_plugin: StartPlugin
) -> None:
    start_plugin()
    pending = apiserver.create(CLAIMS, claim("pending", None))
    good = apiserver.create(CLAIMS, claim("good", [result("gpu-3")]))
    reg = kubelet.register()
    response = reg.prepare(
        ("ns", "uid-missing", "missing"),
        ("ns", pending["metadata"]["uid"], "pending"),
        ("ns", "uid-of-an-older-claim", "good"),
        ("ns", good["metadata"]["uid"], "good"),
    )
    assert "ns/missing not found" in response.claims["uid-missing"].error
    assert "not allocated" in response.claims[pending["metadata"]["uid"]].error
    assert "not uid-of-an-older-claim" in response.claims["uid-of-an-older-claim"].error
    assert [d.device_name for d in response.claims[good["metadata"]["uid"]].devices] == ["gpu-3"]


def test_serves_again_when_its_sockets_are_removed(
    kubelet: FakePluginWatcher, start_plugin: StartPlugin, root: Path
) -> None:
    start_plugin()
    first = kubelet.register()
    first.socket.unlink()
    wait_until(
        lambda: first.socket.is_socket(), START_SECONDS, what="the re-created registration socket"
    )
    second = kubelet.register()
    assert second.info.endpoint == first.info.endpoint


def test_exits_cleanly_and_removes_its_sockets(
    kubelet: FakePluginWatcher, start_plugin: StartPlugin, root: Path
) -> None:
    plugin = start_plugin()
    reg = kubelet.register()
    assert plugin.terminate() == 0
    assert not reg.socket.exists()
    assert not Path(reg.info.endpoint).exists()


def test_waits_for_the_profile(apiserver: ApiServer, start_plugin: StartPlugin, root: Path) -> None:
    profile = root / "later.yaml"
    plugin = start_plugin(config=profile)
    wait_until(lambda: "waiting" in plugin.log(), START_SECONDS, what="the waiting line")
    assert apiserver.get(SLICE) is None
    profile.write_text((REPO_ROOT / "e2e/profiles/four-gpus.yaml").read_text())
    wait_until(
        lambda: apiserver.get(SLICE), START_SECONDS, what="the slice once the profile exists"
    )
