"""The plugin process against a fake kubelet over real unix sockets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from devtools.waiting import wait_until
from tests.infra.fakeplugin.conftest import UUIDS, PluginProcess
from tests.infra.fakeplugin.devicemanager import FakeDeviceManager
from tests.support import REPO_ROOT, START_SECONDS

pytestmark = pytest.mark.timing

StartPlugin = Callable[..., PluginProcess]
SOCKET = "fakeplugin-nvidia.com_gpu.sock"


def test_registers_the_profile_gpus(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin, plugin_dir: Path
) -> None:
    start_plugin()
    reg = kubelet.wait_for_registrations(1)
    assert reg.request.version == "v1beta1"
    assert reg.request.endpoint == SOCKET
    assert reg.request.resource_name == "nvidia.com/gpu"
    assert not reg.options.pre_start_required
    assert not reg.options.get_preferred_allocation_available
    assert (plugin_dir / SOCKET).is_socket()
    assert reg.devices == [(u, "Healthy") for u in UUIDS]


def test_replicas_unhealthy_and_resource_name(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin, plugin_dir: Path
) -> None:
    start_plugin(
        "--replicas", "2", "--unhealthy", UUIDS[1], "--resource-name", "nvidia.com/gpu.shared"
    )
    reg = kubelet.wait_for_registrations(1)
    assert reg.request.resource_name == "nvidia.com/gpu.shared"
    assert reg.request.endpoint == "fakeplugin-nvidia.com_gpu.shared.sock"
    assert reg.devices == [
        (f"{u}::{k}", "Unhealthy" if u == UUIDS[1] else "Healthy") for u in UUIDS for k in (0, 1)
    ]


def test_allocate_answers_each_container_with_physical_uuids(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin
) -> None:
    start_plugin("--replicas", "2")
    reg = kubelet.wait_for_registrations(1)
    response = reg.allocate(
        [f"{UUIDS[2]}::1", f"{UUIDS[0]}::0", f"{UUIDS[2]}::0"], [f"{UUIDS[3]}::1"]
    )
    assert len(response.container_responses) == 2
    first, second = response.container_responses
    assert dict(first.envs) == {"NVIDIA_VISIBLE_DEVICES": f"{UUIDS[2]},{UUIDS[0]}"}
    assert dict(second.envs) == {"NVIDIA_VISIBLE_DEVICES": UUIDS[3]}
    for container in response.container_responses:
        assert not container.mounts
        assert not container.devices
        assert not container.annotations
        assert not container.cdi_devices


def test_allocate_rejects_ids_it_never_advertised(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin
) -> None:
    start_plugin()
    reg = kubelet.wait_for_registrations(1)
    with pytest.raises(grpc.RpcError) as err:
        reg.allocate([f"{UUIDS[0]}::0"])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_serves_first_and_registers_when_the_kubelet_appears(
    plugin_dir: Path, start_plugin: StartPlugin
) -> None:
    plugin = start_plugin()
    wait_until((plugin_dir / SOCKET).is_socket, START_SECONDS, what="the plugin socket")
    with FakeDeviceManager(plugin_dir) as kubelet:
        reg = kubelet.wait_for_registrations(1)
        assert reg.devices == [(u, "Healthy") for u in UUIDS]
    assert plugin.proc.poll() is None


def test_reregisters_after_a_kubelet_restart(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin, plugin_dir: Path
) -> None:
    plugin = start_plugin()
    first = kubelet.wait_for_registrations(1)
    kubelet.restart()  # removes every socket in the plugin directory, ours too
    second = kubelet.wait_for_registrations(2)
    assert first.stream_ended.wait(5)
    assert second.request.endpoint == SOCKET
    assert second.devices == [(u, "Healthy") for u in UUIDS]
    # It noticed its socket was gone and serves a new one at the same path.
    assert f"our socket {plugin_dir / SOCKET} is gone" in plugin.log()
    assert (plugin_dir / SOCKET).is_socket()
    assert dict(second.allocate([UUIDS[1]]).container_responses[0].envs) == {
        "NVIDIA_VISIBLE_DEVICES": UUIDS[1]
    }
    kubelet.restart()
    kubelet.wait_for_registrations(3)
    assert plugin.proc.poll() is None
    assert len(kubelet.registrations) == 3


def test_sigterm_stops_serving_and_removes_the_socket(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin, plugin_dir: Path
) -> None:
    plugin = start_plugin()
    reg = kubelet.wait_for_registrations(1)
    assert plugin.terminate() == 0
    assert reg.stream_ended.wait(5)
    assert not (plugin_dir / SOCKET).exists()
    assert "received SIGTERM" in plugin.log()


def test_waits_for_the_profile(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin, plugin_dir: Path
) -> None:
    profile = plugin_dir.parent / "config.yaml"
    plugin = start_plugin(config=profile)
    wait_until(
        lambda: "waiting" in plugin.log(), START_SECONDS, what="the plugin to wait for its profile"
    )
    assert not kubelet.registrations
    profile.write_text((REPO_ROOT / "e2e/profiles/four-gpus.yaml").read_text())
    reg = kubelet.wait_for_registrations(1)
    assert [d for d, _ in reg.devices or []] == UUIDS


def test_restarts_its_server_when_its_socket_is_deleted(
    kubelet: FakeDeviceManager, start_plugin: StartPlugin, plugin_dir: Path
) -> None:
    start_plugin()
    kubelet.wait_for_registrations(1)
    (plugin_dir / SOCKET).unlink()
    second = kubelet.wait_for_registrations(2)
    assert second.devices == [(u, "Healthy") for u in UUIDS]
    assert (plugin_dir / SOCKET).is_socket()
