"""`make e2e` names everything kind's e2e lacks in one pass, and the way without kind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import REPO_ROOT

PREFLIGHT = REPO_ROOT / "hack" / "e2e-preflight.sh"


def tool(directory: Path, name: str, exit_code: int) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\nexit {exit_code}\n")
    path.chmod(0o755)
    return path


def env_with(**tools: str) -> dict[str, str]:
    drop = {"KIND", "KUBECTL", "DOCKER", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **tools}


def preflight(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PREFLIGHT)], capture_output=True, text=True, env=env, timeout=60)


def test_every_missing_tool_is_named_at_once_with_e2e_local(tmp_path: Path) -> None:
    env = env_with(
        KIND=str(tmp_path / "kind"),
        KUBECTL=str(tmp_path / "kubectl"),
        DOCKER=str(tool(tmp_path, "docker", 1)),  # a CLI whose daemon does not answer
    )
    done = preflight(env)
    assert done.returncode == 1
    first, second = done.stderr.splitlines()
    assert f"kind (KIND={tmp_path / 'kind'} not found)" in first
    assert f"kubectl (KUBECTL={tmp_path / 'kubectl'} not found)" in first
    assert "a Docker daemon" in first and "info` fails" in first
    assert "make e2e-local" in second


def test_a_missing_docker_cli_is_named_too(tmp_path: Path) -> None:
    env = env_with(
        KIND=str(tool(tmp_path, "kind", 0)),
        KUBECTL=str(tool(tmp_path, "kubectl", 0)),
        DOCKER=str(tmp_path / "docker"),
    )
    done = preflight(env)
    assert done.returncode == 1
    assert f"docker (DOCKER={tmp_path / 'docker'} not found)" in done.stderr
    assert "kind (" not in done.stderr and "kubectl (" not in done.stderr


def test_nothing_is_said_when_everything_is_there(tmp_path: Path) -> None:
    env = env_with(
        KIND=str(tool(tmp_path, "kind", 0)),
        KUBECTL=str(tool(tmp_path, "kubectl", 0)),
        DOCKER=str(tool(tmp_path, "docker", 0)),
    )
    done = preflight(env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_make_e2e_runs_it_before_anything_else(tmp_path: Path) -> None:
    env = env_with(KIND=str(tmp_path / "kind"), DOCKER=str(tmp_path / "docker"))
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), f"VENV={tmp_path / 'venv'}", "e2e"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0
    assert "make e2e-local" in done.stderr
    assert f"kind (KIND={tmp_path / 'kind'} not found)" in done.stderr
    # neither the venv nor helm was set up first
    assert not (tmp_path / "venv").exists()
