"""The NVML probe process seen from the tests: the real mock library, read through pynvml
in a process of its own (nvml_probe), so its environment is clean and its
override store lives across reads, as in any NVML consumer."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from devtools.upstream import REPO, Upstream

# How often the mock library re-reads the override file (MOCK_NVML_OVERRIDES_TTL).
TTL_S = 0.1


class Probe:
    def __init__(self, upstream: Upstream, config: Path, overrides: Path, log: Path) -> None:
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(upstream.lib_dir), env.get("LD_LIBRARY_PATH", "")) if p
        )
        env["MOCK_NVML_CONFIG"] = str(config)
        env["MOCK_NVML_OVERRIDES"] = str(overrides)
        env["MOCK_NVML_OVERRIDES_TTL"] = f"{int(TTL_S * 1000)}ms"
        env["PYTHONPATH"] = str(REPO)
        self.log = log
        self._stderr = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.interop.nvml_probe"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
            cwd=REPO,
            env=env,
        )
        first = self._line()
        assert first.get("ready") == 8, f"NVML did not come up: {first} {self.log.read_text()}"

    def _line(self, timeout: float = 30.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"NVML probe did not answer within {timeout}s: {self.log.read_text()}"
        line = self.proc.stdout.readline()
        assert line, f"NVML probe exited {self.proc.poll()}: {self.log.read_text()}"
        out: dict[str, Any] = json.loads(line)
        return out

    def read(self) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        out = self._line()
        assert "error" not in out, f"NVML error: {out['error']}"
        devices: list[dict[str, Any]] = out["devices"]
        return devices

    def read_processes(self) -> dict[str, Any]:
        """Each device's compute processes, read with a sized buffer (see nvml_probe)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("processes\n")
        self.proc.stdin.flush()
        out = self._line()
        assert "error" not in out, f"NVML error: {out['error']}"
        return out

    def read_activity(self) -> list[dict[str, Any]]:
        """Each device's utilization, power, temperature and process samples (nvml_probe)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("activity\n")
        self.proc.stdin.flush()
        out = self._line()
        assert "error" not in out, f"NVML error: {out['error']}"
        activity: list[dict[str, Any]] = out["activity"]
        return activity

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._stderr.close()


def nvml_memory(dev: dict[str, Any]) -> tuple[int, int]:
    """(used, free) as NVML reports them, after checking v1 and v2 agree."""
    v1, v2 = dev["v1"], dev["v2"]
    assert (v1["used"], v1["free"]) == (v2["used"], v2["free"]), dev
    return v1["used"], v1["free"]
