"""The pods of one namespace on one node: find them, wait for them, run Python in them.

A pod the framework starts that refuses to start ends the wait at once with
its own words (its termination message, else its last log lines) instead of
running out the timeout on a restart loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devtools.waiting import WaitAbort, wait_until

from .kubectl import Kubectl, KubectlError

# Waiting reasons a container does not leave by itself.
STUCK = frozenset(
    {
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


@dataclass(frozen=True)
class StartupFailure:
    pod: str
    container: str
    reason: str
    # what the container said, when its status carries it
    message: str
    # the container has exited at least once: its previous run has logs
    exited: bool

    def describe(self, said: str) -> str:
        text = f"pod {self.pod} container {self.container} cannot start ({self.reason})"
        return f"{text}:\n{said.rstrip()}" if said.strip() else text


def startup_failure(pod: dict[str, Any]) -> StartupFailure | None:
    """Why a container of `pod` cannot start, when one is stuck or has just failed.

    A pod being deleted is not failing; a container that exited non-zero is,
    from its first exit: waiting for CrashLoopBackOff only delays the news.
    """
    if pod["metadata"].get("deletionTimestamp"):
        return None
    name = str(pod["metadata"]["name"])
    status = pod.get("status", {})
    for container in status.get("initContainerStatuses", []) + status.get("containerStatuses", []):
        state = container.get("state", {})
        last = container.get("lastState", {}).get("terminated") or {}
        terminated = state.get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            reason = f"{terminated.get('reason') or 'exited'} {terminated['exitCode']}"
            return StartupFailure(
                name, container["name"], reason, terminated.get("message", ""), False
            )
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in STUCK:
            if last:
                # The exit's own message; without one, its logs say more than the back-off.
                reason = f"{waiting['reason']}, last exit {last.get('exitCode')}"
                message = last.get("message", "")
            else:
                reason, message = waiting["reason"], waiting.get("message", "")
            return StartupFailure(name, container["name"], reason, message, bool(last))
    return None


class Pods:
    def __init__(
        self, kubectl: Kubectl, namespace: str, node: str, diagnostics: Callable[[], str]
    ) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.node = node
        self.diagnostics = diagnostics

    def list(self, selector: str) -> list[dict[str, Any]]:
        items = self.kubectl.get("pods", "-n", self.namespace, "-l", selector)["items"]
        return [p for p in items if p["spec"].get("nodeName") == self.node]

    def names(self, selector: str) -> list[str]:
        """Best effort, for diagnostics: no names rather than an error."""
        try:
            return [p["metadata"]["name"] for p in self.list(selector)]
        except KubectlError:
            return []

    def ready(self, selector: str) -> str | None:
        for pod in self.list(selector):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
            if conditions.get("Ready") == "True":
                return str(pod["metadata"]["name"])
        return None

    def refusal(self, failure: StartupFailure) -> str:
        """The failure in the container's own words: its message, else its logs."""
        said = failure.message
        if not said.strip():
            try:
                said = self.kubectl.logs(
                    self.namespace, failure.pod, failure.container, tail=20, previous=failure.exited
                )
            except KubectlError as exc:
                said = f"<no logs: {exc}>"
        return failure.describe(said)

    def wait_ready(self, selector: str, timeout: float = 120) -> str:
        """A Ready pod's name; a pod that cannot start ends the wait with its reason."""

        def ready_or_refused() -> str | None:
            name = self.ready(selector)
            if name:
                return name
            for pod in self.list(selector):
                failure = startup_failure(pod)
                if failure:
                    raise WaitAbort(self.refusal(failure))
            return None

        return wait_until(
            ready_or_refused,
            timeout,
            f"a Ready pod {selector} on {self.node}",
            diagnostics=self.diagnostics,
        )

    def wait_rollout(self, daemonset: str, selector: str, timeout: float = 120) -> None:
        """Every pod of the DaemonSet updated and available; a pod that cannot start
        ends the wait with its reason."""

        def rolled_out() -> bool:
            ds = self.kubectl.get("daemonset", daemonset, "-n", self.namespace)
            status = ds.get("status", {})
            desired = status.get("desiredNumberScheduled", 0)
            if (
                status.get("observedGeneration", 0) >= ds["metadata"]["generation"]
                and desired > 0
                and status.get("updatedNumberScheduled", 0) == desired
                and status.get("numberAvailable", 0) == desired
            ):
                return True
            for pod in self.list(selector):
                failure = startup_failure(pod)
                if failure:
                    raise WaitAbort(self.refusal(failure))
            return False

        wait_until(
            rolled_out,
            timeout,
            f"daemonset {daemonset} to roll out on {self.node}",
            diagnostics=self.diagnostics,
        )

    def wait_gone(self, selector: str, timeout: float = 60) -> None:
        wait_until(
            lambda: not self.list(selector),
            timeout,
            f"pods {selector} to be gone",
            diagnostics=self.diagnostics,
        )

    def python(self, pod: str, source: str, *args: str, timeout: float = 30) -> Any:
        """Run `source` with python3 in the pod; its last stdout line is JSON."""
        out = self.kubectl.exec(
            self.namespace, pod, ["python3", "-c", source, *args], timeout=timeout
        )
        return json.loads(out.strip().splitlines()[-1])
