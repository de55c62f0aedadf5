"""A fake Kubernetes API server for pods, over real HTTP, and the faults a real one shows.

It serves `GET /api/v1/pods` as a list (honouring `fieldSelector=spec.nodeName=`)
and, with `watch=true`, as a stream of watch events from `resourceVersion`
that ends after `timeoutSeconds`, as the real one does. The test drives it:
`put` and `delete` change pods (and notify the watches, unless told not to,
which stands for events lost to compaction); `hang` makes every open watch
go silent and every new request wait unanswered; `reset` drops every
connection with a TCP reset; `heal` ends those. `compact` forgets the events
so far: a watch from before it ends with a 410, as an `ERROR` event (what
an open watch gets) or, with `as_status`, as the HTTP status of the next
watch request from that resourceVersion.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.loopbackapi import serving

PodKey = tuple[str, str]
EXPIRED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "too old resource version", "reason": "Expired", "code": 410}  # fmt: skip


class _Reset(Exception):
    """Drop the connection with a TCP reset."""


class PodApi:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pods: dict[PodKey, dict[str, Any]] = {}
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resourceVersion, type, pod)
        self.rv = 1
        self.fault: str | None = None
        self.compacted = 0  # a watch from an older resourceVersion gets a 410
        self.as_status = False
        self.closing = False
        self.requests: list[dict[str, list[str]]] = []  # the query of every request, in order
        self.waiting = 0  # requests held unanswered by `hang`

    # -- what the test does

    def put(
        self,
        namespace: str,
        name: str,
        annotations: dict[str, str] | None = None,
        node: str = "node-a",
        *,
        notify: bool = True,
    ) -> None:
        with self.cond:
            kind = "MODIFIED" if (namespace, name) in self.pods else "ADDED"
            self.rv += 1
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "namespace": namespace,
                    "name": name,
                    "resourceVersion": str(self.rv),
                    "annotations": annotations or {},
                },
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            }
            self.pods[(namespace, name)] = pod
            if notify:
                self.events.append((self.rv, kind, pod))
            self.cond.notify_all()

    def delete(self, namespace: str, name: str, *, notify: bool = True) -> None:
        with self.cond:
            pod = self.pods.pop((namespace, name))
            self.rv += 1
            if notify:
                gone = {**pod, "metadata": {**pod["metadata"], "resourceVersion": str(self.rv)}}
                self.events.append((self.rv, "DELETED", gone))
            self.cond.notify_all()

    def hang(self) -> None:
        self._set_fault("hang")

    def reset(self) -> None:
        self._set_fault("reset")

    def heal(self) -> None:
        self._set_fault(None)

    def compact(self, *, as_status: bool = False) -> None:
        with self.cond:
            self.compacted = self.rv
            self.as_status = as_status
            self.cond.notify_all()

    def lists(self) -> int:
        return sum(1 for q in self.requests if q.get("watch") != ["true"])

    def watches(self) -> int:
        return sum(1 for q in self.requests if q.get("watch") == ["true"])

    def _set_fault(self, fault: str | None) -> None:
        with self.cond:
            self.fault = fault
            self.cond.notify_all()

    # -- what the handler does

    def serve(self, handler: _Handler) -> None:
        url = urlsplit(handler.path)
        query = parse_qs(url.query)
        with self.cond:
            self.requests.append(query)
            self._wait_out_faults()
        if url.path != "/api/v1/pods":
            handler.reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
            return
        selector = query.get("fieldSelector", [""])[0]
        node = selector.removeprefix("spec.nodeName=") if selector else None
        if query.get("watch") == ["true"]:
            since = int(query.get("resourceVersion", ["0"])[0])
            self._watch(handler, node, since, float(query.get("timeoutSeconds", ["300"])[0]))
            return
        with self.cond:
            items = [p for p in self.pods.values() if node in (None, p["spec"]["nodeName"])]
            body = {"kind": "PodList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self.rv)}, "items": items}  # fmt: skip
        handler.reply(200, body)

    def _wait_out_faults(self) -> None:
        """Called holding cond: a reset drops the request, a hang holds it."""
        if self.fault == "reset":
            raise _Reset
        self.waiting += 1
        try:
            while self.fault == "hang" and not self.closing:
                self.cond.wait()
        finally:
            self.waiting -= 1
        if self.closing:
            raise _Reset

    def _watch(self, handler: _Handler, node: str | None, since: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        with self.cond:
            if since < self.compacted and self.as_status:
                handler.reply(410, EXPIRED)
                return
        handler.start_stream()
        while True:
            with self.cond:
                while True:
                    if self.closing or self.fault == "reset":
                        raise _Reset
                    if since < self.compacted:
                        if not self.as_status:
                            handler.send_event("ERROR", EXPIRED)
                        return  # with as_status, the next request is refused
                    if self.fault == "hang":
                        self.cond.wait()  # silent, and past its deadline too
                        continue
                    pending = [(rv, t, p) for rv, t, p in self.events if rv > since]
                    if pending:
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self.cond.wait(left)
            for rv, kind, pod in pending:
                since = rv
                if node in (None, pod["spec"]["nodeName"]):
                    handler.send_event(kind, pod)


class _Handler(BaseHTTPRequestHandler):
    api: PodApi

    def do_GET(self) -> None:
        try:
            self.api.serve(self)
        except _Reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        except OSError:
            self.close_connection = True  # the client went away

    def reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        # HTTP/1.0 without a length: the stream ends when the connection closes
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.flush()

    def send_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.wfile.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def pod_api(workdir: Path) -> Iterator[tuple[PodApi, Path]]:
    """A running fake server, and a kubeconfig that points at it."""
    api = PodApi()
    handler = type("Handler", (_Handler,), {"api": api})
    with serving(handler, workdir, {"token": "t"}) as kubeconfig:
        try:
            yield api, kubeconfig
        finally:
            with api.cond:
                api.closing = True
                api.cond.notify_all()
