"""A pod the e2e starts that refuses to start fails the wait at once, in its own words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.waiting import WaitAbort
from e2e.framework.kubectl import Kubectl
from e2e.framework.manifests import render
from e2e.framework.nodefiles import STAGE_MARKER
from e2e.framework.pods import Pods, startup_failure
from tests.support.runqueue import OwnClock

pytestmark = pytest.mark.timing

NODE = "node-a"


def pod(name: str, *statuses: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"nodeName": NODE},
        "status": {"conditions": [{"type": "Ready", "status": "False"}],
                   "containerStatuses": list(statuses)},
    }  # fmt: skip


def container(state: dict[str, Any], last: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "helper", "state": state, "lastState": last or {}, "restartCount": 1}


def crashed(message: str = "", code: int = 1) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": "Error", "message": message}}


BACKOFF = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting"}}


def test_a_container_that_exited_non_zero_has_failed_from_its_first_exit() -> None:
    failure = startup_failure(pod("p", container(crashed("config.yaml is not ours"))))
    assert failure is not None
    assert (failure.pod, failure.container, failure.reason) == ("p", "helper", "Error 1")
    assert failure.message == "config.yaml is not ours"


def test_a_crash_loop_carries_the_last_exits_message() -> None:
    failure = startup_failure(pod("p", container(BACKOFF, crashed("not ours", code=2))))
    assert failure is not None
    assert failure.reason == "CrashLoopBackOff, last exit 2"
    assert failure.message == "not ours" and failure.exited


@pytest.mark.parametrize(
    "reason", ["ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"]
)
def test_a_container_stuck_before_its_first_start_has_failed(reason: str) -> None:
    stuck = {"waiting": {"reason": reason, "message": "no such image"}}
    failure = startup_failure(pod("p", container(stuck)))
    assert failure is not None
    assert failure.reason == reason and failure.message == "no such image" and not failure.exited


@pytest.mark.parametrize(
    "statuses",
    [
        [],
        [container({"waiting": {"reason": "ContainerCreating"}})],
        [container({"running": {"startedAt": "2026-01-01T00:00:00Z"}})],
        [container({"terminated": {"exitCode": 0, "reason": "Completed"}})],
    ],
    ids=["scheduled", "creating", "running", "completed"],
)
def test_a_starting_or_running_pod_has_not_failed(statuses: list[dict[str, Any]]) -> None:
    assert startup_failure(pod("p", *statuses)) is None


def test_a_pod_being_deleted_has_not_failed() -> None:
    assert startup_failure(pod("p", container(crashed("killed"), None), deleting=True)) is None


class ScriptedKubectl(Kubectl):
    """Answers `get pods` and `logs` from fixed data, counting the calls."""

    def __init__(self, pods: list[dict[str, Any]], logs: str = "") -> None:
        super().__init__(None, binary="kubectl-not-called")
        self.items = pods
        self.log_text = logs
        self.log_calls: list[dict[str, Any]] = []

    def get(self, *args: str) -> Any:
        assert args[0] == "pods", args
        return {"items": self.items}

    def logs(self, namespace: str, pod: str, container: str | None = None,
             tail: int | None = None, previous: bool = False) -> str:  # fmt: skip
        self.log_calls.append({"pod": pod, "container": container, "previous": previous})
        return self.log_text


def helper_refusal(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the node helper's own script on a root whose config.yaml is not ours."""
    config = tmp_path / "driver" / "config"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text("version: 1\n")
    manifest = render(
        "node-helper.yaml.j2", namespace="ns", node=NODE, image="img", stage=True,
        profile="", nvml_mock_root=str(tmp_path), marker=STAGE_MARKER,
    )  # fmt: skip
    daemonset = next(d for d in yaml.safe_load_all(manifest) if d["kind"] == "DaemonSet")
    helper = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert helper["terminationMessagePolicy"] == "FallbackToLogsOnError"
    return subprocess.run(
        [sys.executable, "-c", helper["args"][0]],
        env={**os.environ, "STAGE": "true"},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_helper_refuses_a_config_it_did_not_stage(tmp_path: Path) -> None:
    refused = helper_refusal(tmp_path)
    assert refused.returncode == 1
    assert "config.yaml is not ours" in refused.stderr
    assert "--nvml-mock=installed" in refused.stderr
    assert not (tmp_path / "driver" / "config" / STAGE_MARKER).exists()


def test_waiting_for_a_refusing_helper_fails_at_once_with_its_message(tmp_path: Path) -> None:
    said = helper_refusal(tmp_path).stderr  # what FallbackToLogsOnError puts in the status
    kubectl = ScriptedKubectl([pod("helper-1", container(BACKOFF, crashed(said)))])
    pods = Pods(kubectl, "ns", NODE, diagnostics=lambda: "<diagnostics>")
    clock = OwnClock()
    with pytest.raises(WaitAbort) as refused:
        pods.wait_ready("app=helper", timeout=60)
    assert clock.seconds() < 5, "the wait ran on after the refusal"
    message = str(refused.value)
    assert "pod helper-1 container helper cannot start (CrashLoopBackOff, last exit 1)" in message
    assert "config.yaml is not ours" in message and "--nvml-mock=installed" in message
    assert message.endswith("<diagnostics>")
    assert kubectl.log_calls == [], "the status carried the message: no logs needed"


def test_without_a_termination_message_the_previous_logs_say_why() -> None:
    kubectl = ScriptedKubectl(
        [pod("helper-1", container(BACKOFF, crashed("")))], logs="Traceback: boom\n"
    )
    pods = Pods(kubectl, "ns", NODE, diagnostics=lambda: "")
    with pytest.raises(WaitAbort, match="Traceback: boom"):
        pods.wait_ready("app=helper", timeout=60)
    assert kubectl.log_calls == [{"pod": "helper-1", "container": "helper", "previous": True}]


def test_a_pod_that_only_starts_slowly_is_waited_for() -> None:
    creating = pod("helper-1", container({"waiting": {"reason": "ContainerCreating"}}))
    kubectl = ScriptedKubectl([creating])
    pods = Pods(kubectl, "ns", NODE, diagnostics=lambda: "")
    with pytest.raises(AssertionError, match=r"timed out after 0\.5s"):
        pods.wait_ready("app=helper", timeout=0.5)
    creating["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert pods.wait_ready("app=helper", timeout=5) == "helper-1"
