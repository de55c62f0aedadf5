"""A lightkube client for the API server: in-cluster, or from a kubeconfig file.

All that the pod watch needs to know about lightkube's configuration and
transport is here; lightkube itself is imported only when a client is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(Exception):
    """Neither the in-cluster configuration nor the kubeconfig given can be used."""


def async_client(
    kubeconfig: str | Path | None, service_account: str | Path, timeout: float, watch_read: float
) -> Any:
    """A lightkube AsyncClient. Without `kubeconfig`, the in-cluster configuration: the
    service account's token, ca.crt and namespace files, KUBERNETES_SERVICE_HOST and
    _PORT. `timeout` bounds connects and requests; `watch_read` a watch's reads."""
    import httpx2
    from lightkube import AsyncClient, KubeConfig
    from lightkube.config.client_adapter import verify_cluster

    try:
        if kubeconfig is not None:
            config = KubeConfig.from_file(kubeconfig).get()
        else:
            config = KubeConfig.from_service_account(service_account).get()
    except KeyError as exc:  # lightkube reads the environment with os.environ[...]
        raise ConfigError(f"in-cluster configuration: {exc.args[0]} is not set") from exc
    except Exception as exc:
        raise ConfigError(f"{kubeconfig or 'in-cluster configuration'}: {exc}") from exc
    if config is None:
        raise ConfigError(f"{kubeconfig}: no current context")
    # lightkube turns the read timeout off for watches, so a hung server would
    # hold one forever. The transport gives a watch's reads `watch_read`, which a
    # live server never reaches when it ends each watch before. Rejected: a
    # deadline around each event, which cannot tell a quiet watch from a hung
    # one without a relist each time it passes.
    verify = verify_cluster(config.cluster, config.user, config.abs_file, trust_env=False)
    transport = _WatchReadTimeout(httpx2.AsyncHTTPTransport(verify=verify), watch_read)
    # trust_env off: no proxy from the environment between a pod and its API server
    return AsyncClient(
        config, timeout=httpx2.Timeout(timeout), trust_env=False, transport=transport
    )


def expired(exc: Exception) -> bool:
    """Whether `exc` says the watch's resourceVersion is too old (410 Gone), as an
    ERROR event (lightkube's ApiError) or as the HTTP status of the request."""
    status = getattr(exc, "status", None)
    if getattr(status, "code", None) == 410:
        return True
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) == 410


class _WatchReadTimeout:
    """An httpx transport that gives requests without a read timeout one."""

    def __init__(self, inner: Any, read: float) -> None:
        self._inner = inner
        self._read = read

    async def handle_async_request(self, request: Any) -> Any:
        timeout = request.extensions.get("timeout")
        if timeout is not None and timeout.get("read") is None:
            request.extensions["timeout"] = {**timeout, "read": self._read}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
