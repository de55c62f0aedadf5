"""Just enough of the Kubernetes REST API for the plugin: get, create, replace.

A stdlib HTTP client rather than the `kubernetes` package: the plugin needs
four calls on three resources, and its image shares the watcher's venv, which
should not grow a large client library for a test fixture. It authenticates
as the pod's service account, or not at all against an explicit server URL
(`kubectl proxy`, or a test's fake API server).
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeApi(Protocol):
    def get(self, path: str) -> Any | None: ...
    def create(self, collection: str, body: Any) -> Any: ...
    def replace(self, path: str, body: Any) -> Any: ...


class RestClient:
    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    @classmethod
    def in_cluster(cls, timeout: float = 10.0) -> RestClient:
        """The API server from the service environment, as the pod's service account."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ApiError(0, "not in a cluster: KUBERNETES_SERVICE_HOST is unset")
        if ":" in host:
            host = f"[{host}]"
        return cls(
            f"https://{host}:{port}",
            token=(SERVICE_ACCOUNT / "token").read_text().strip(),
            ca_file=str(SERVICE_ACCOUNT / "ca.crt"),
            timeout=timeout,
        )

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self.context
            ) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = json.loads(detail).get("message", detail)
            raise ApiError(exc.code, f"{method} {path}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(0, f"{method} {path}: {exc}") from None

    def get(self, path: str) -> Any | None:
        """The object, or None when it does not exist."""
        try:
            return self._call("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, collection: str, body: Any) -> Any:
        return self._call("POST", collection, body)

    def replace(self, path: str, body: Any) -> Any:
        return self._call("PUT", path, body)
