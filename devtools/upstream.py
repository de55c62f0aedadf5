"""Find the upstream nvml-mock tools, and drive them and their documents.

The tools come from `hack/upstream/build.sh` (built once from the pinned
source, then cached), or from a directory named by `ALLOCWATCH_UPSTREAM_DIR`
that holds `nvml-mock-ctl` and `libnvidia-ml.so.1`. A dev-only package, not in
the wheel: the interop tests and `bench.compare` both drive upstream through it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devtools.podresources import FakePodResourcesLister

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "hack" / "upstream" / "build.sh"
ENV_DIR = "ALLOCWATCH_UPSTREAM_DIR"


class UpstreamUnavailable(RuntimeError):
    """The upstream tools are neither given nor buildable here."""


@dataclass(frozen=True)
class Upstream:
    root: Path

    @property
    def ctl(self) -> Path:
        return self.root / "nvml-mock-ctl"

    @property
    def lib_dir(self) -> Path:
        """The directory holding libnvidia-ml.so.1 (for LD_LIBRARY_PATH)."""
        return self.root

    def missing(self) -> list[str]:
        wanted = [self.ctl, self.root / "libnvidia-ml.so.1"]
        return [p.name for p in wanted if not p.exists()]


def locate(build_timeout: float = 1800.0) -> Upstream:
    """The upstream tools: from $ALLOCWATCH_UPSTREAM_DIR, else built (cached) with Go."""
    given = os.environ.get(ENV_DIR)
    if given:
        up = Upstream(Path(given))
        if up.missing():
            raise UpstreamUnavailable(f"{ENV_DIR}={given} lacks {', '.join(up.missing())}")
        return up
    proc = subprocess.run(
        [str(BUILD_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=build_timeout,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UpstreamUnavailable(f"hack/upstream/build.sh exited {proc.returncode}: {tail}")
    up = Upstream(Path(proc.stdout.strip().splitlines()[-1]))
    if up.missing():
        raise UpstreamUnavailable(f"build.sh output {up.root} lacks {', '.join(up.missing())}")
    return up


class Ctl:
    """`nvml-mock-ctl` bound to one overrides file and one profile (through its env)."""

    def __init__(self, upstream: Upstream, overrides: Path, config: Path) -> None:
        self.binary = upstream.ctl
        self.overrides = overrides
        self.config = config

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["MOCK_NVML_OVERRIDES"] = str(self.overrides)
        env["MOCK_NVML_CONFIG"] = str(self.config)
        return env

    def run(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str) -> str:
        """Run a command that must succeed; return its stdout."""
        proc = self.run(*args)
        assert proc.returncode == 0, (
            f"nvml-mock-ctl {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
        )
        return proc.stdout

    def status(self, *args: str) -> dict[str, Any]:
        """`status` parsed; {} for "no active overrides"."""
        out = self.ok("status", *args)
        if out.startswith("no active overrides"):
            return {}
        doc = yaml.safe_load(out)
        assert isinstance(doc, dict), f"status printed a non-mapping: {out!r}"
        return doc


def allocwatch_once(
    kubelet: FakePodResourcesLister, config: Path, overrides: Path, *extra: str
) -> None:
    """Our watcher's one-shot publish, the counterpart of an upstream run."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "allocwatch",
            "--once",
            "--socket",
            kubelet.socket_path,
            "--config",
            str(config),
            "--overrides",
            str(overrides),
            "--metrics-address",
            "",
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
