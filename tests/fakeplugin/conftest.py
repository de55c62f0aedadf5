"""Fixtures: a plugin directory, a fake kubelet in it, and the plugin as a process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakeplugin.kubelet import FakeKubelet

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILE = REPO_ROOT / "e2e" / "profiles" / "four-gpus.yaml"
UUIDS = [f"GPU-e2e0a11c-0000-4000-8000-00000000000{i}" for i in range(4)]


class PluginProcess:
    """`python -m fakeplugin` with only `e2e` and the repository on PYTHONPATH, as in its image."""

    def __init__(self, plugin_dir: Path, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "e2e"), str(REPO_ROOT)]))
        self.log_path = (
            plugin_dir.parent / f"plugin-{len(list(plugin_dir.parent.glob('plugin-*')))}.log"
        )
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fakeplugin",
                "--plugin-dir",
                str(plugin_dir),
                "--poll-interval",
                "0.1",
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=plugin_dir.parent,
        )

    def log(self) -> str:
        return self.log_path.read_text()

    def terminate(self, timeout: float = 10.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to ~108 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="fp-", dir="/tmp"))
    (root / "device-plugins").mkdir()
    yield root / "device-plugins"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[FakeKubelet]:
    with FakeKubelet(plugin_dir) as k:
        yield k


@pytest.fixture
def start_plugin(
    plugin_dir: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., PluginProcess]]:
    started: list[PluginProcess] = []

    def start(*args: str, config: Path = PROFILE) -> PluginProcess:
        plugin = PluginProcess(plugin_dir, "--config", str(config), *args)
        started.append(plugin)
        return plugin

    yield start
    for plugin in started:
        plugin.stop()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for plugin in started:
            print(f"--- {plugin.log_path.name} ---\n{plugin.log()}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
