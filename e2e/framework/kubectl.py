"""A thin kubectl wrapper bound to one kubeconfig."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol


class KubectlError(RuntimeError):
    pass


def run_checked(
    cmd: list[str], what: str, env: dict[str, str], timeout: float, input: str | None = None
) -> str:
    """`cmd`'s stdout; KubectlError naming `what` when it fails or times out."""
    try:
        proc = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise KubectlError(f"{what}: timed out after {timeout}s") from exc
    if proc.returncode != 0:
        raise KubectlError(f"{what}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


class Exec(Protocol):
    def exec(
        self,
        namespace: str,
        pod: str,
        argv: list[str],
        container: str | None = None,
        timeout: float = 30,
    ) -> str: ...


class Kubectl:
    def __init__(self, kubeconfig: Path | None, binary: str | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.binary = binary or os.environ.get("KUBECTL") or shutil.which("kubectl") or "kubectl"
        self._exec_through: Exec | None = None

    @contextlib.contextmanager
    def exec_through(self, other: Exec) -> Iterator[None]:
        """exec() goes through `other` for the block: hostexec.HostExec while the
        API server is away, so every reader of the node keeps working."""
        self._exec_through = other
        try:
            yield
        finally:
            self._exec_through = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    def run(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        return run_checked(
            [self.binary, *args], f"kubectl {' '.join(args)}", self.env(), timeout, input
        )

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", *args, "-o", "json"))

    def apply(self, manifest: str) -> str:
        return self.run("apply", "-f", "-", input=manifest)

    def delete(self, *args: str, wait: bool = False) -> str:
        return self.run("delete", *args, "--ignore-not-found", f"--wait={str(wait).lower()}")

    def exec(
        self,
        namespace: str,
        pod: str,
        argv: list[str],
        container: str | None = None,
        timeout: float = 30,
    ) -> str:
        if self._exec_through is not None:
            return self._exec_through.exec(namespace, pod, argv, container, timeout)
        args = ["exec", "-n", namespace, pod]
        if container:
            args += ["-c", container]
        return self.run(*args, "--", *argv, timeout=timeout)

    def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        tail: int | None = None,
        previous: bool = False,
    ) -> str:
        args = ["logs", "-n", namespace, pod]
        if container:
            args += ["-c", container]
        if tail is not None:
            args += [f"--tail={tail}"]
        if previous:
            args.append("--previous")
        return self.run(*args)
