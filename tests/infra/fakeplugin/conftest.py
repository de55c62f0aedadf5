"""Fixtures: a plugin directory, a fake kubelet in it, and the plugin as a process."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.infra.fakeplugin.devicemanager import FakeDeviceManager
from tests.support import REPO_ROOT
from tests.support.pluginprocess import (
    PluginProcess,
    pytest_runtest_makereport,  # noqa: F401 - pytest finds hooks in conftest
    stop_all,
)

PROFILE = REPO_ROOT / "e2e" / "profiles" / "four-gpus.yaml"
UUIDS = [f"GPU-e2e0a11c-0000-4000-8000-00000000000{i}" for i in range(4)]


def start_plugin_process(plugin_dir: Path, *args: str) -> PluginProcess:
    """`python -m fakeplugin` with only `e2e` and the repository on PYTHONPATH, as in its image."""
    return PluginProcess(
        [
            sys.executable, "-m", "fakeplugin",
            "--plugin-dir", str(plugin_dir),
            "--poll-interval", "0.1",
            *args,
        ],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "e2e"), str(REPO_ROOT)])),
        cwd=plugin_dir.parent,
    )  # fmt: skip


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to ~108 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="fp-", dir="/tmp"))
    (root / "device-plugins").mkdir()
    yield root / "device-plugins"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[FakeDeviceManager]:
    with FakeDeviceManager(plugin_dir) as k:
        yield k


@pytest.fixture
def start_plugin(
    plugin_dir: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., PluginProcess]]:
    started: list[PluginProcess] = []

    def start(*args: str, config: Path = PROFILE) -> PluginProcess:
        plugin = start_plugin_process(plugin_dir, "--config", str(config), *args)
        started.append(plugin)
        return plugin

    yield start
    stop_all(started, request)
