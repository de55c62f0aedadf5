"""HostExec against a real process in a real cgroup named like a container.

The process stands for a container: its cgroup's name holds the container id
a pod status reports, and it has an environment and a working directory of
its own, which commands run through HostExec must get, as kubectl exec's do.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.waiting import wait_until
from e2e.framework.hostexec import HostExec
from e2e.framework.kubectl import Kubectl, KubectlError

pytestmark = pytest.mark.timing

CGROUPS = Path("/sys/fs/cgroup")


def _hierarchy() -> Path:
    """cgroup v2's root, or v1's pids hierarchy."""
    return CGROUPS if (CGROUPS / "cgroup.procs").exists() else CGROUPS / "pids"


class StatusOnly(Kubectl):
    """A Kubectl whose `get` answers one pod's status, as the API server would."""

    def __init__(self, container_id: str) -> None:
        super().__init__(None)
        self.container_id = container_id

    def get(self, *args: str) -> Any:
        assert args == ("pod", "-n", "ns", "pod-a")
        return {
            "status": {
                "containerStatuses": [
                    {"name": "main", "containerID": f"containerd://{self.container_id}"}
                ]
            }
        }


@pytest.fixture
def container(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(container id, its first process): a sh with a child, in a cgroup of that id."""
    cid = uuid.uuid4().hex + uuid.uuid4().hex
    group = _hierarchy() / f"allocwatch-test-{cid}"
    group.mkdir()
    # the shell joins the group itself before it starts its child, so both are in it
    proc = subprocess.Popen(
        ["sh", "-c", f"echo $$ > {group}/cgroup.procs; sleep 600 & echo started; wait"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "MARK": "inside"},
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    try:
        yield cid, proc
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            os.kill(int(pid), 9)
        proc.wait(10)
        wait_until(lambda: not (group / "cgroup.procs").read_text().strip(), 10, "an empty cgroup")
        group.rmdir()


def test_exec_runs_in_the_containers_environment_and_directory(
    container: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    cid, proc = container
    host = HostExec(StatusOnly(cid))
    host.remember("ns", "pod-a")
    # of the shell and its sleep, the first process is the shell
    assert host.init_pid("ns", "pod-a") == proc.pid
    out = host.exec("ns", "pod-a", ["sh", "-c", 'echo "$MARK $(pwd)"'])
    assert out == f"inside {tmp_path}\n"


def test_a_failing_command_raises_as_kubectl_exec_would(
    container: tuple[str, subprocess.Popen[bytes]],
) -> None:
    host = HostExec(StatusOnly(container[0]))
    host.remember("ns", "pod-a")
    with pytest.raises(KubectlError, match="exit 3"):
        host.exec("ns", "pod-a", ["sh", "-c", "exit 3"])


def test_kill_ends_the_containers_first_process(
    container: tuple[str, subprocess.Popen[bytes]],
) -> None:
    cid, proc = container
    host = HostExec(StatusOnly(cid))
    host.remember("ns", "pod-a")
    host.kill("ns", "pod-a")
    assert proc.wait(10) == -9


def test_a_pod_not_remembered_or_not_on_this_machine_is_refused() -> None:
    host = HostExec(StatusOnly(uuid.uuid4().hex))
    with pytest.raises(KubectlError, match="not remembered"):
        host.exec("ns", "pod-a", ["true"])
    host.remember("ns", "pod-a")  # a container no process of this machine is in
    with pytest.raises(KubectlError, match="node's host"):
        host.exec("ns", "pod-a", ["true"])
