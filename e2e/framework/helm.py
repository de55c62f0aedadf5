"""helm, from HELM or PATH (hack/install-helm.sh installs a pinned one)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class HelmError(RuntimeError):
    pass


def find_helm() -> str:
    helm = os.environ.get("HELM") or shutil.which("helm")
    if not helm:
        raise HelmError("helm not found: set HELM or run hack/install-helm.sh")
    return helm


class Helm:
    def __init__(self, kubeconfig: Path | None, binary: str | None = None) -> None:
        self.binary = binary or find_helm()
        self.kubeconfig = kubeconfig

    def run(self, *args: str, timeout: float = 180) -> str:
        env = dict(os.environ)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        proc = subprocess.run(
            [self.binary, *args], capture_output=True, text=True, timeout=timeout, env=env
        )
        if proc.returncode != 0:
            raise HelmError(f"helm {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def upgrade_install(self, release: str, chart: Path, namespace: str, values: Path) -> str:
        return self.run(
            "upgrade", "--install", release, str(chart), "--namespace", namespace, "-f", str(values)
        )

    def uninstall(self, release: str, namespace: str) -> str:
        return self.run("uninstall", release, "--namespace", namespace, "--ignore-not-found")
