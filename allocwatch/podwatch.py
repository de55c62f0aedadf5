"""The load the pods of this node declare, kept current from the API server.

A daemon thread lists the node's pods (field selector `spec.nodeName`) and
watches them from the list's resourceVersion, through lightkube on an
asyncio loop of its own; it relists when the watch expires (410) and after
any error, with a capped backoff. What it keeps of each pod is PodLoads'
(bounded); the client is kubeclient's. The poll loop reads a snapshot that
is swapped whole, so `loads()` and `health()` never wait for the thread,
whatever the API server does.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from allocwatch.declaredload import DeclaredLoad, Problem
from allocwatch.kubeclient import SERVICE_ACCOUNT, async_client
from allocwatch.kubeclient import expired as is_expired
from allocwatch.podloads import MAX_PODS, PodKey, PodLoads

log = logging.getLogger("allocwatch.podwatch")

FIRST_BACKOFF = 0.5
NOT_LISTED = "not listed yet"


@dataclass(frozen=True)
class WatchHealth:
    current: bool  # the last list succeeded and its watch has not failed since
    stale_since: float | None  # time.monotonic() when it stopped being current; None if current
    error: str | None  # why it is not current


class LoadSource(Protocol):
    """What the poll loop reads each poll; neither call may block."""

    def loads(self) -> Mapping[PodKey, DeclaredLoad]: ...

    def health(self) -> WatchHealth: ...


class PodWatch:
    """Watches the pods bound to `node`; `start()` it, then read `loads()` and `health()`."""

    def __init__(
        self,
        node: str,
        *,
        kubeconfig: str | Path | None = None,
        service_account: str | Path = SERVICE_ACCOUNT,
        max_pods: int = MAX_PODS,
        on_rejected: Callable[[str], None] | None = None,
        watch_seconds: int = 60,
        timeout: float = 10.0,
        max_backoff: float = 30.0,
    ) -> None:
        """`kubeconfig`: a file to read instead of the in-cluster configuration (the
        service account's directory, KUBERNETES_SERVICE_HOST and _PORT).
        `on_rejected(annotation)`: called, on the watch thread, once per value refused.
        `watch_seconds`: the server ends each watch after this; a watch silent for
        `timeout` longer is taken as hung. `timeout` also bounds connects and lists."""
        self.node = node
        self._kubeconfig = kubeconfig
        self._service_account = service_account
        self._on_rejected = on_rejected
        self._watch_seconds = watch_seconds
        self._timeout = timeout
        self._max_backoff = max_backoff
        self._pods = PodLoads(max_pods)
        self._health = WatchHealth(False, time.monotonic(), NOT_LISTED)
        self._capped = False  # the cap's warning is logged
        self._listed = False  # a list has succeeded
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = threading.Event()

    def loads(self) -> Mapping[PodKey, DeclaredLoad]:
        """Pods that declare a load; the same object until something changes."""
        return self._pods.snapshot()

    def health(self) -> WatchHealth:
        return self._health

    def start(self) -> None:
        """Read the configuration (kubeclient.ConfigError if it cannot be used), start watching."""
        # lightkube is imported only now, when the option is on
        client = async_client(
            self._kubeconfig,
            self._service_account,
            self._timeout,
            self._watch_seconds + self._timeout,
        )
        self._thread = threading.Thread(
            target=self._run, args=(client,), name="podwatch", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Cancel the watch and wait up to `timeout` for the thread to end."""
        # The watch runs on asyncio so that this can cancel a read a hung server
        # holds. Rejected: lightkube's sync client on a thread, which only the
        # read timeout (over watch_seconds) could end; a daemon thread left in
        # it would not delay the exit, but would still be running.
        self._stopping.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, client: Any) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._task = loop.create_task(self._main(client))
        # stop() cancels the task once it is set; before, it leaves this flag
        if self._stopping.is_set():
            self._task.cancel()
        try:
            loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("the pod watch failed; pods keep the last annotations seen")
            self._health = WatchHealth(False, time.monotonic(), "the pod watch failed")
        finally:
            # closing a TLS connection may wait on the server: no longer than stop() does
            with suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(client.close(), 1.0))
            loop.close()

    async def _main(self, client: Any) -> None:
        from lightkube.resources.core_v1 import Pod

        fields = {"spec.nodeName": self.node}
        failures = 0  # in a row: lists that failed, or watches that failed at once
        while not self._stopping.is_set():
            watched, expired = None, False
            try:
                pods = client.list(Pod, namespace="*", fields=fields)
                listed = [(_key(pod), pod.metadata.annotations) async for pod in pods]
                self._current(len(listed))  # first, so a reader who sees the list sees it current
                for key, problems in self._pods.replace(listed).items():
                    self._report(key, problems)
                watched = time.monotonic()
                events = client.watch(
                    Pod,
                    namespace="*",
                    fields=fields,
                    resource_version=pods.resourceVersion,
                    server_timeout=self._watch_seconds,
                )
                async for kind, pod in events:
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        gone = kind == "DELETED"
                        annotations = None if gone else pod.metadata.annotations
                        self._report(_key(pod), self._pods.set(_key(pod), annotations))
            except Exception as exc:
                # an expired watch is routine: still current, and the relist follows
                expired = is_expired(exc)
                if not expired:
                    self._stale(exc)
            # A watch that ran a while was working. One that fails at once (say,
            # refused by RBAC while the list is allowed) backs off as a failed list does.
            if watched is not None and time.monotonic() - watched > self._max_backoff:
                failures = 0
            delay = FIRST_BACKOFF
            if not expired:
                failures = min(failures + 1, 16)
                delay = min(FIRST_BACKOFF * 2 ** (failures - 1), self._max_backoff)
            # jitter, so that the nodes of a cluster do not relist in step
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))

    def _report(self, key: PodKey, problems: list[Problem] | None) -> None:
        if problems is None:
            if not self._capped:
                log.warning(
                    "more than %d pods declare a load; %s/%s and later ones get the defaults",
                    self._pods.max_pods,
                    *key,
                )
            self._capped = True
            return
        self._capped = self._capped and len(self._pods) >= self._pods.max_pods
        for problem in problems:
            log.warning("pod %s/%s: %s; it gets the default", *key, problem)
            if self._on_rejected is not None:
                self._on_rejected(problem.annotation)

    def _current(self, pods: int) -> None:
        was = self._health
        if was.current:
            return
        if not self._listed:
            log.info("watching the pods of node %s, %d of them now", self.node, pods)
            self._listed = True
        else:
            stale = time.monotonic() - (was.stale_since or 0)
            log.info("pod annotations are current again, after %.0fs stale", stale)
        self._health = WatchHealth(True, None, None)

    def _stale(self, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        error = error[:200]
        was = self._health
        if was.current or was.error == NOT_LISTED:
            log.warning(
                "pod annotations are stale (%s); pods keep the last annotations seen, "
                "and pods not seen the defaults",
                error,
            )
        else:
            log.debug("pod watch: %s", error)
        self._health = WatchHealth(False, was.stale_since or time.monotonic(), error)


def _key(pod: Any) -> PodKey:
    return (pod.metadata.namespace, pod.metadata.name)
