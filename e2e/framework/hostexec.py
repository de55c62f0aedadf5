"""Commands in a pod's container, run from this machine while the API server is away.

`kubectl exec` goes through the API server. The local cluster's pods, and a
kind node's, are processes of the machine the suite runs on, so the suite can
enter a container's namespaces itself (nsenter) once it knows the container's
id, which it learns while the API server is still there.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .kubectl import Kubectl, KubectlError, run_checked

PROC = Path("/proc")


class HostExec:
    """`exec` with Kubectl.exec's signature, for pods `remember`ed beforehand."""

    def __init__(self, kubectl: Kubectl, proc: Path = PROC) -> None:
        self.kubectl = kubectl
        self.proc = proc
        # (namespace, pod) -> container name -> container id
        self._containers: dict[tuple[str, str], dict[str, str]] = {}

    def remember(self, namespace: str, pod: str) -> None:
        """Learn the pod's container ids (through the API server, so before it goes)."""
        status = self.kubectl.get("pod", "-n", namespace, pod)["status"]
        ids = {
            c["name"]: c["containerID"].partition("://")[2]
            for c in status.get("containerStatuses", [])
            if c.get("containerID")
        }
        if not ids:
            raise KubectlError(f"pod {namespace}/{pod} has no running container to remember")
        self._containers[(namespace, pod)] = ids

    def init_pid(self, namespace: str, pod: str, container: str | None = None) -> int:
        """The pid, on this machine, of the container's first process."""
        ids = self._containers.get((namespace, pod))
        if ids is None:
            raise KubectlError(f"pod {namespace}/{pod} was not remembered")
        name = container or next(iter(ids))
        if name not in ids:
            raise KubectlError(f"pod {namespace}/{pod} has no container {name}")
        pids = self._pids_of(ids[name])
        # the first process is the one whose parent (the runtime's shim) is outside
        first = [pid for pid, parent in pids.items() if parent not in pids]
        if len(first) != 1:
            raise KubectlError(
                f"pod {namespace}/{pod} container {name}: {len(pids)} processes on this "
                "machine; is the suite running on the node's host?"
            )
        return first[0]

    def exec(
        self,
        namespace: str,
        pod: str,
        argv: list[str],
        container: str | None = None,
        timeout: float = 30,
    ) -> str:
        pid = self.init_pid(namespace, pod, container)
        # the container's own environment, as kubectl exec would give it
        raw = (self.proc / str(pid) / "environ").read_bytes()
        env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
        namespaces = ["--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd"]
        cmd = ["nsenter", f"--target={pid}", *namespaces, "--", *argv]
        return run_checked(cmd, f"{' '.join(argv)} in {pod}", env, timeout)

    def kill(self, namespace: str, pod: str) -> None:
        """SIGKILL every container of the pod: with restartPolicy Never it is over."""
        for container in self._containers[(namespace, pod)]:
            os.kill(self.init_pid(namespace, pod, container), signal.SIGKILL)

    def _pids_of(self, container_id: str) -> dict[int, int]:
        """pid -> parent pid of every process in the container's cgroup."""
        found: dict[int, int] = {}
        for entry in self.proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if container_id not in (entry / "cgroup").read_text():
                    continue
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            # the fields after the command name, which may hold spaces and parentheses
            found[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        return found
