"""hack/upstream/dra-driver.sh against a stand-in for NVIDIA's DRA driver source.

The stand-in is shaped as the pinned release ships: a module of upstream's path
whose only dependency sits in its committed vendor/, the GPU kubelet plugin's
main package printing the version variables upstream's link flags set, the
chart's init script, the templates and the chart. It is served both ways the
script takes it: as the pinned tarball beside the repository, checked against
its sha256, and, without a tarball, as a git repository holding the pinned
commit (source.sh, shared with nothing else yet, does both).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.infra.test_upstream_build import (
    DEP,
    DEP_VERSION,
    GO,
    HACK,
    build,
    git_repo_of,
    hack_copy,
    output_dir,
    tarball_of,
    write,
)

PIN_FILE = HACK / "upstream" / "dra-driver.version"
PIN = dict(
    line.split("=", 1)
    for line in PIN_FILE.read_text().splitlines()
    if line and not line.startswith("#")
)
MODULE = "sigs.k8s.io/dra-driver-nvidia-gpu"
CHART = "deployments/helm/dra-driver-nvidia-gpu"


def stand_in_tree(root: Path) -> Path:
    write(
        root,
        {
            "go.mod": f"module {MODULE}\n\ngo 1.22\n\nrequire {DEP} {DEP_VERSION}\n",
            "vendor/modules.txt": f"# {DEP} {DEP_VERSION}\n## explicit; go 1.22\n{DEP}\n",
            f"vendor/{DEP}/dep.go": (
                'package nvmlmockdep\n\nfunc Name() string { return "stand-in upstream" }\n'
            ),
            "internal/info/info.go": "package info\n\nvar version, gitCommit string\n\n"
            'func Version() string { return version + " " + gitCommit }\n',
            "cmd/gpu-kubelet-plugin/main.go": (
                f'package main\n\nimport (\n\t"fmt"\n\n\tdep "{DEP}"\n\t"{MODULE}/internal/info"\n)'
                "\n\nfunc main() { fmt.Println(dep.Name(), info.Version()) }\n"
            ),
            "cmd/webhook/main.go": "package main\n\nfunc main() { undefined() }\n",
            "hack/kubelet-plugin-prestart.sh": "#!/usr/bin/env bash\nexit 0\n",
            "templates/mps.tmpl.yaml": "kind: Deployment\n",
            f"{CHART}/Chart.yaml": "name: dra-driver-nvidia-gpu\nversion: 0.0.1\n",
            "LICENSE": "stand-in license\n",
        },
    )
    return root


@dataclass
class StandIn:
    root: Path
    cache: Path
    tarball: Path
    digest: str
    script: Path  # pins the stand-in tarball, which sits where the real one would
    out: Path  # its build


def dra_copy(repo: Path, **pins: str) -> Path:
    """hack/upstream under repo/, dra-driver.version's pins replaced; returns dra-driver.sh."""
    hack_copy(repo)
    pin = repo / "hack" / "upstream" / PIN_FILE.name
    lines = []
    for line in pin.read_text().splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={pins.pop(key)}" if key in pins else line)
    assert not pins, pins
    pin.write_text("\n".join(lines) + "\n")
    return repo / "hack" / "upstream" / "dra-driver.sh"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    if not os.access(GO, os.X_OK):
        pytest.fail("these tests need Go: put `go` on PATH (CI installs it in .ci/run)")
    root = tmp_path_factory.mktemp("dra-driver-build")
    tree = stand_in_tree(root / "tree")
    tarball = root / "shared" / "upstream" / PIN["tarball"]
    digest = tarball_of(tree, tarball)
    script = dra_copy(root / "repo", tarball_sha256=digest)
    cache = root / "cache"
    out = output_dir(build(script, cache))
    yield StandIn(root, cache, tarball, digest, script, out)


def plugin_says(out: Path) -> str:
    plugin = [str(out / "gpu-kubelet-plugin")]
    return subprocess.run(plugin, capture_output=True, text=True, check=True).stdout


def test_builds_the_plugin_from_the_pinned_tarball(stand_in: StandIn) -> None:
    out = stand_in.out
    assert out.parent == stand_in.cache / "upstream"
    assert out.name.startswith(f"dra-driver-tar-{stand_in.digest[:12]}-")
    assert (out / "SOURCE").read_text().split() == [
        PIN["tarball"],
        "sha256",
        stand_in.digest,
        f"({PIN['commit']})",
    ]
    # vendor/ only, with upstream's version variables linked in
    assert plugin_says(out) == f"stand-in upstream {PIN['version']} {PIN['commit']}\n"


def test_ships_what_the_image_and_the_chart_take(stand_in: StandIn) -> None:
    out = stand_in.out
    assert os.access(out / "kubelet-plugin-prestart.sh", os.X_OK)
    assert (out / "templates" / "mps.tmpl.yaml").read_text() == "kind: Deployment\n"
    assert (out / "chart" / "Chart.yaml").is_file()
    assert (out / "LICENSE").read_text() == "stand-in license\n"
    # only the GPU kubelet plugin is built (the stand-in's webhook does not compile)
    assert sorted(p.name for p in out.iterdir()) == [
        "LICENSE",
        "SOURCE",
        "chart",
        "gpu-kubelet-plugin",
        "kubelet-plugin-prestart.sh",
        "templates",
    ]


def test_a_cached_build_is_reused_without_go(stand_in: StandIn) -> None:
    again = build(stand_in.script, stand_in.cache, GO="/nonexistent/go")
    assert output_dir(again) == stand_in.out


def test_a_tarball_with_another_digest_is_refused(stand_in: StandIn) -> None:
    """The real pin against the stand-in: one line says so, and nothing is built."""
    cache = stand_in.root / "refused-cache"
    result = build(
        HACK / "upstream" / "dra-driver.sh", cache, ALLOCWATCH_DRA_TARBALL=str(stand_in.tarball)
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"dra-driver.sh: {stand_in.tarball} has sha256 {stand_in.digest}, not the pinned "
        f"{PIN['tarball_sha256']} (hack/upstream/dra-driver.version); refusing to build it\n"
    )
    assert not (cache / "upstream").exists()


def test_a_named_tarball_that_is_missing_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.tar.gz"
    result = build(
        HACK / "upstream" / "dra-driver.sh", tmp_path / "cache", ALLOCWATCH_DRA_TARBALL=str(missing)
    )
    assert result.returncode == 1
    assert result.stderr == f"dra-driver.sh: ALLOCWATCH_DRA_TARBALL={missing}: no such file\n"


def test_a_changed_recipe_is_not_served_from_the_cache(stand_in: StandIn) -> None:
    """Another pin file (or script) builds afresh: here, without Go, it cannot."""
    script = dra_copy(
        stand_in.root / "recipe",
        tarball_sha256=stand_in.digest,
        repository="https://example.invalid/another-recipe",
    )
    result = build(
        script, stand_in.cache, GO="/nonexistent/go", ALLOCWATCH_DRA_TARBALL=str(stand_in.tarball)
    )
    assert result.returncode == 1, result.stdout
    assert "no working Go toolchain (/nonexistent/go" in result.stderr


def test_without_a_tarball_it_clones_the_pinned_commit(stand_in: StandIn) -> None:
    origin = stand_in.root / "origin"
    commit = git_repo_of(stand_in.root / "tree", origin)
    # no shared/upstream/ beside this copy
    script = dra_copy(stand_in.root / "clone" / "repo", commit=commit)
    url = f"file://{origin}"
    out = output_dir(build(script, stand_in.cache, ALLOCWATCH_DRA_GIT=url))
    assert out.name.startswith(f"dra-driver-git-{commit[:12]}-")
    assert (out / "SOURCE").read_text() == f"{url}@{commit}\n"
    # the pinned commit, not the branch head after it
    assert plugin_says(out) == f"stand-in upstream {PIN['version']} {commit}\n"


def test_a_repository_without_the_pinned_commit_fails_clearly(stand_in: StandIn) -> None:
    origin = stand_in.root / "unpinned"
    git_repo_of(stand_in.root / "tree", origin)
    script = dra_copy(stand_in.root / "unpinned-clone" / "repo")
    cache = stand_in.root / "unpinned-cache"
    result = build(script, cache, ALLOCWATCH_DRA_GIT=f"file://{origin}")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"dra-driver.sh: cannot fetch {PIN['commit']} from file://{origin} "
        "(no tarball at ../shared/upstream/ either)"
    )
    assert not list((cache / "upstream").glob("dra-driver-git-*"))
