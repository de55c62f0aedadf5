"""Fixtures: kubelet directories, a fake API server process, the plugin as a process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.infra.fakedra.pluginwatcher import FakePluginWatcher
from tests.support import REPO_ROOT
from tests.support.pluginprocess import (
    PluginProcess,
    pytest_runtest_makereport,  # noqa: F401 - pytest finds hooks in conftest
    stop_all,
)

PROFILE = REPO_ROOT / "e2e" / "profiles" / "four-gpus.yaml"
UUIDS = [f"GPU-e2e0a11c-0000-4000-8000-00000000000{i}" for i in range(4)]
NODE = "node-a"
DRIVER = "gpu.nvidia.com"
RESOURCE = "/apis/resource.k8s.io/v1"
SLICE = f"{RESOURCE}/resourceslices/{NODE}-{DRIVER}"
DEVICE_CLASS = f"{RESOURCE}/deviceclasses/{DRIVER}"


class ApiServer:
    """`python -m tests.infra.fakedra.apiserver`, and plain HTTP calls to it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.infra.fakedra.apiserver"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), self.url

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def create(self, collection: str, obj: Any) -> Any:
        return self.call("POST", collection, obj)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start_plugin_process(root: Path, api_url: str, *args: str) -> PluginProcess:
    """`python -m e2e.fakedra` with the repository on PYTHONPATH, as in its image."""
    return PluginProcess(
        [
            sys.executable, "-m", "e2e.fakedra",
            "--registry-dir", str(root / "plugins_registry"),
            "--plugin-root", str(root / "plugins"),
            "--api-server", api_url,
            "--node-name", NODE,
            "--poll-interval", "0.1",
            *args,
        ],
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        cwd=root,
    )  # fmt: skip


@pytest.fixture
def root() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to ~108 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="fd-", dir="/tmp"))
    (d / "plugins_registry").mkdir()
    (d / "plugins").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer()
    yield server
    server.stop()


@pytest.fixture
def kubelet(root: Path) -> Iterator[FakePluginWatcher]:
    with FakePluginWatcher(root / "plugins_registry") as k:
        yield k


@pytest.fixture
def start_plugin(
    root: Path, apiserver: ApiServer, request: pytest.FixtureRequest
) -> Iterator[Callable[..., PluginProcess]]:
    started: list[PluginProcess] = []

    def start(*args: str, config: Path = PROFILE) -> PluginProcess:
        plugin = start_plugin_process(root, apiserver.url, "--config", str(config), *args)
        started.append(plugin)
        return plugin

    yield start
    stop_all(started, request)
