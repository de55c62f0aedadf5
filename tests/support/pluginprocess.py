"""A fake kubelet plugin run as its own process, its output kept in a log file.

Both fake plugins' tests start the plugin the way its image does and print the
logs of a failed test; only the command line and PYTHONPATH differ.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest


class PluginProcess:
    """`argv` as a process in `cwd`, stdout and stderr into a new plugin-N.log there."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self.log_path = cwd / f"plugin-{len(list(cwd.glob('plugin-*')))}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            list(argv), stdout=self._log, stderr=subprocess.STDOUT, env=dict(env), cwd=cwd
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


def stop_all(started: list[PluginProcess], request: pytest.FixtureRequest) -> None:
    """Stop every plugin a test started; print their logs if the test failed.

    The test's outcome comes from `pytest_runtest_makereport` below, which a
    conftest.py imports so pytest registers it there.
    """
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
