"""Find the upstream nvml-mock tools, and drive them and their documents.

The tools come from `hack/upstream/build.sh` (built once from the pinned
source, then cached), or from a directory named by `ALLOCWATCH_UPSTREAM_DIR`
that holds `nvml-mock-ctl` and `libnvidia-ml.so.1`. A dev-only package, not in
the wheel: the interop tests and `bench.compare` both drive upstream through it.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fakekubelet import FakeKubelet

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "hack" / "upstream" / "build.sh"
ENV_DIR = "ALLOCWATCH_UPSTREAM_DIR"
MEMORY_KEYS = ("used_bytes", "free_bytes")


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


def load(path: Path) -> dict[str, Any]:
    """The document on disk ({} when absent or blank). Go writers emit plain YAML."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    doc = yaml.safe_load(text)
    if doc is None:
        return {}
    assert isinstance(doc, dict), f"{path} is not a mapping: {text!r}"
    return doc


def memory(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"<i>": {"used_bytes": u, "free_bytes": f}} for every device bucket that has them."""
    out: dict[str, dict[str, Any]] = {}
    for idx, bucket in (doc.get("devices") or {}).items():
        mem = (bucket or {}).get("memory") or {}
        picked = {k: mem[k] for k in MEMORY_KEYS if k in mem}
        if picked:
            out[str(idx)] = picked
    return out


def without_memory(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document minus the watcher's keys (and the maps they leave empty)."""
    out = copy.deepcopy(dict(doc))
    devices = out.get("devices") or {}
    for idx in list(devices):
        bucket = devices[idx]
        if isinstance(bucket, dict) and isinstance(bucket.get("memory"), dict):
            for key in MEMORY_KEYS:
                bucket["memory"].pop(key, None)
            if not bucket["memory"]:
                del bucket["memory"]
        if not bucket:
            del devices[idx]
    if "devices" in out and not out["devices"]:
        del out["devices"]
    return out


def processes(doc: Mapping[str, Any]) -> dict[str, list[Any]]:
    """{"<i>": [entry, ...]} for every device bucket with a `processes` list."""
    devices = doc.get("devices") or {}
    return {str(i): b["processes"] for i, b in devices.items() if "processes" in (b or {})}


def without_processes(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document minus every `processes` key (and the maps that leaves empty)."""
    out = copy.deepcopy(dict(doc))
    devices = out.get("devices") or {}
    for idx in list(devices):
        if isinstance(devices[idx], dict):
            devices[idx].pop("processes", None)
            if not devices[idx]:
                del devices[idx]
    if "devices" in out and not out["devices"]:
        del out["devices"]
    return out


def same(a: Any, b: Any) -> bool:
    """Equality that also demands equal types: 1, 1.0, True and "1" all differ."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.005) -> Any:
    """Poll until predicate() is truthy; return its value or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


def allocwatch_once(kubelet: FakeKubelet, config: Path, overrides: Path, *extra: str) -> None:
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
