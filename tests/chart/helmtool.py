"""Chart test helpers: find helm, render the chart, parse the output."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "allocwatch"
# Scenario values, as chart-testing reads them (`ci/*-values.yaml`).
SCENARIOS = sorted((CHART / "ci").glob("*-values.yaml"))
RELEASE = "aw"
NAMESPACE = "gpu-sim"


def helm_binary() -> str:
    """The helm to use: $HELM, else helm on PATH. Fails (never skips) without one."""
    explicit = os.environ.get("HELM")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            pytest.fail(f"HELM={explicit} is not an executable file", pytrace=False)
        return explicit
    found = shutil.which("helm")
    if found is None:
        pytest.fail(
            "helm not found: run hack/install-helm.sh (it installs the pinned helm and "
            "links it as /usr/local/bin/helm), or set HELM=/path/to/helm",
            pytrace=False,
        )
    return found


class _UniqueKeyLoader(yaml.SafeLoader):
    """Refuses a key written twice in one mapping.

    PyYAML keeps the last, while the API server's strict decoding refuses
    the object, so a template that repeats a key must fail here.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def objects(self) -> list[dict[str, Any]]:
        assert self.returncode == 0, self.stderr
        return [doc for doc in yaml.load_all(self.stdout, Loader=_UniqueKeyLoader) if doc]


class Helm:
    def __init__(self, binary: str, tmp: Path) -> None:
        self.binary = binary
        self.tmp = tmp
        self._files = 0

    def run(self, *args: str, kubeconfig: Path | None = None) -> Result:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.tmp / "cache"),
            "HELM_CONFIG_HOME": str(self.tmp / "config"),
            "HELM_DATA_HOME": str(self.tmp / "data"),
        }
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        proc = subprocess.run(
            [self.binary, *args], capture_output=True, text=True, timeout=60, env=env
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def values_file(self, values: dict[str, Any]) -> Path:
        self._files += 1
        path = self.tmp / f"values-{self._files}.yaml"
        path.write_text(yaml.safe_dump(values))
        return path

    def template(
        self,
        values: dict[str, Any] | None = None,
        *extra: str,
        kube_version: str | None = None,
    ) -> Result:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        if values:
            args += ["-f", str(self.values_file(values))]
        if kube_version:
            args += ["--kube-version", kube_version]
        return self.run(*args, *extra)

    def render(
        self, values: dict[str, Any] | None = None, *extra: str, kube_version: str | None = None
    ) -> list[dict[str, Any]]:
        return self.template(values, *extra, kube_version=kube_version).objects()


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[o['kind'] for o in objects]}"
    return found[0]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = only(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]
