"""A minimal Kubernetes API server over real HTTP: discovery, and a fixed list of nodes.

Enough for `helm install --dry-run=server`, whose templates may then `lookup`
nodes: helm's own client asks for the version, discovers the API groups, lists
nodes and looks for the release's secrets and the DaemonSet, all by GET.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

from tests.support.loopbackapi import serving

CORE_RESOURCES = [
    {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node"},
    {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret"},
    {"name": "services", "singularName": "service", "namespaced": True, "kind": "Service"},
]
APPS_RESOURCES = [
    {"name": "daemonsets", "singularName": "daemonset", "namespaced": True, "kind": "DaemonSet"},
]
APPS = {"groupVersion": "apps/v1", "version": "v1"}


def _answers(nodes: dict[str, dict[str, str]]) -> dict[str, Any]:
    verbs = ["get", "list"]
    return {
        "/version": {"major": "1", "minor": "35", "gitVersion": "v1.35.0"},
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/apis": {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [{"name": "apps", "versions": [APPS], "preferredVersion": APPS}],
        },
        "/api/v1": {
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [{**r, "verbs": verbs} for r in CORE_RESOURCES],
        },
        "/apis/apps/v1": {
            "kind": "APIResourceList",
            "groupVersion": "apps/v1",
            "resources": [{**r, "verbs": verbs} for r in APPS_RESOURCES],
        },
        "/api/v1/nodes": {
            "kind": "NodeList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [
                {"kind": "Node", "apiVersion": "v1", "metadata": {"name": n, "labels": labels}}
                for n, labels in nodes.items()
            ],
        },
    }


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
            "code": code, "message": reason}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, Any]] = {}
    forbidden: ClassVar[set[str]] = set()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self.answers.get(path)
        if body is None and path.endswith("/secrets"):
            body = {"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": []}
        status = 200
        if path in self.forbidden:
            status, body = 403, _status(403, "Forbidden")
        elif body is None:
            status, body = 404, _status(404, "NotFound")
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def api_server(
    nodes: dict[str, dict[str, str]], workdir: Path, *, may_list_nodes: bool = True
) -> Iterator[Path]:
    """Serve `nodes` (name -> labels), or refuse to list them as RBAC would;
    yields a kubeconfig that points at the server."""
    forbidden = set() if may_list_nodes else {"/api/v1/nodes"}
    handler = type("Handler", (_Handler,), {"answers": _answers(nodes), "forbidden": forbidden})
    with serving(handler, workdir, {}) as kubeconfig:
        yield kubeconfig
