"""hack/upstream/build.sh against a stand-in for the pinned upstream source.

The stand-in is shaped as upstream ships: a module of upstream's path whose
only dependency sits in its committed vendor/, the CLI's main package, and a
mock library built by its own Makefile in pkg/gpu/mocknvml (which links the
version aliases, as upstream's does). It is served both ways build.sh takes
it: as the pinned tarball beside the repository, checked against its sha256,
and, without a tarball, as a git repository holding the pinned commit. Each
needs a copy of hack/ whose VERSION pins the stand-in; the real pins are
used where a test needs them to refuse the stand-in.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

REPO = REPO_ROOT
HACK = REPO / "hack"
PIN = dict(
    line.split("=", 1)
    for line in (HACK / "upstream" / "VERSION").read_text().splitlines()
    if line and not line.startswith("#")
)
MODULE = "github.com/NVIDIA/k8s-test-infra"
DEP, DEP_VERSION = "example.invalid/nvmlmockdep", "v1.0.0"
DRIVER = "9.9.9"
# name -> versioned symbol, as upstream's Makefile aliases them
ALIASES = {
    "nvmlDeviceGetPciInfo": "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetComputeRunningProcesses": "nvmlDeviceGetComputeRunningProcesses_v3",
}
GO = shutil.which("go") or "/usr/local/go/bin/go"
# The stand-in's Makefile refuses to build unless build.sh gave it upstream's
# offline environment: vendored modules only, no module proxy.
MAKEFILE = f"""\
LIB := libnvidia-ml.so.{DRIVER}
all: $(LIB)
\tln -sf $(LIB) libnvidia-ml.so.1
\tln -sf libnvidia-ml.so.1 libnvidia-ml.so
$(LIB):
\ttest "$$GOPROXY" = off
\tcase " $$GOFLAGS " in *" -mod=vendor "*) ;; *) echo "GOFLAGS=$$GOFLAGS"; exit 1;; esac
\tCGO_LDFLAGS_ALLOW='--defsym|-soname' \\
\tCGO_LDFLAGS='{" ".join(f"-Wl,--defsym,{a}={t}" for a, t in ALIASES.items())} \
-Wl,-soname,libnvidia-ml.so.1' \\
\tgo build -buildmode=c-shared -o $(LIB) ./bridge
"""


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def stand_in_tree(root: Path) -> Path:
    """Upstream's shape in miniature: go.mod, vendor/, the CLI, the library's Makefile."""
    exports = "".join(
        f"//export {target}\nfunc {target}() C.int {{ return {i} }}\n\n"
        for i, target in enumerate(ALIASES.values())
    )
    write(
        root,
        {
            "go.mod": f"module {MODULE}\n\ngo 1.22\n\nrequire {DEP} {DEP_VERSION}\n",
            "vendor/modules.txt": f"# {DEP} {DEP_VERSION}\n## explicit; go 1.22\n{DEP}\n",
            f"vendor/{DEP}/dep.go": (
                'package nvmlmockdep\n\nfunc Name() string { return "stand-in upstream" }\n'
            ),
            "cmd/nvml-mock-ctl/main.go": (
                f'package main\n\nimport (\n\t"fmt"\n\n\tdep "{DEP}"\n)\n\n'
                "func main() { fmt.Println(dep.Name()) }\n"
            ),
            # each versioned symbol returns its position, so a call through
            # the unversioned name shows which symbol it reached
            "pkg/gpu/mocknvml/bridge/bridge.go": (
                f'package main\n\nimport "C"\n\nimport dep "{DEP}"\n\n{exports}'
                "var _ = dep.Name\n\nfunc main() {}\n"
            ),
            "pkg/gpu/mocknvml/Makefile": MAKEFILE,
        },
    )
    return root


def tarball_of(tree: Path, dest: Path) -> str:
    """`git archive`'s layout (one top folder); returns the sha256."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(tree, arcname="k8s-test-infra-3b2b865d")
    return hashlib.sha256(dest.read_bytes()).hexdigest()


def git_repo_of(tree: Path, dest: Path) -> str:
    """A repository holding the tree, then a later commit that changes it; returns the first."""
    shutil.copytree(tree, dest)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")

    def git(*args: str) -> str:
        proc = subprocess.run(
            ["git", "-C", str(dest), *args], env=env, capture_output=True, text=True, check=True
        )
        return proc.stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "stand-in")
    pinned = git("rev-parse", "HEAD")
    dep = dest / "vendor" / DEP / "dep.go"
    dep.write_text(dep.read_text().replace("stand-in upstream", "a later commit"))
    git("commit", "-qam", "later")
    return pinned


def hack_copy(repo: Path, **pins: str) -> Path:
    """hack/upstream and common.sh under repo/, VERSION's pins replaced; returns build.sh."""
    shutil.copytree(HACK / "upstream", repo / "hack" / "upstream")
    shutil.copy(HACK / "common.sh", repo / "hack" / "common.sh")
    version = repo / "hack" / "upstream" / "VERSION"
    text = version.read_text()
    for key, value in pins.items():
        text, n = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.M)
        assert n == 1, key
    version.write_text(text)
    return repo / "hack" / "upstream" / "build.sh"


def build(script: Path, cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GO", "ALLOCWATCH_"))}
    return subprocess.run(
        ["bash", str(script), *args],
        env=base | {"ALLOCWATCH_CACHE": str(cache), "GO": GO} | env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def output_dir(result: subprocess.CompletedProcess[str]) -> Path:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    return Path(lines[0])


@dataclass
class StandIn:
    root: Path
    cache: Path
    tarball: Path
    digest: str
    script: Path  # pins the stand-in tarball, which sits where the real one would
    out: Path  # its build


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    if not os.access(GO, os.X_OK):
        pytest.fail("these tests need Go: put `go` on PATH (CI installs it in .ci/run)")
    root = tmp_path_factory.mktemp("upstream-build")
    tree = stand_in_tree(root / "tree")
    tarball = root / "shared" / "upstream" / PIN["tarball"]
    digest = tarball_of(tree, tarball)
    script = hack_copy(root / "repo", tarball_sha256=digest)
    cache = root / "cache"
    out = output_dir(build(script, cache))
    yield StandIn(root, cache, tarball, digest, script, out)


def test_builds_the_pinned_tarball_beside_the_repository(stand_in: StandIn) -> None:
    out = stand_in.out
    assert out.parent == stand_in.cache / "upstream"
    assert out.name.startswith(f"tar-{stand_in.digest[:12]}-")
    assert (out / "SOURCE").read_text().split() == [
        PIN["tarball"],
        "sha256",
        stand_in.digest,
        f"({PIN['commit']})",
    ]
    # the CLI links the dependency that only vendor/ has
    cli = subprocess.run([str(out / "nvml-mock-ctl")], capture_output=True, text=True, check=True)
    assert cli.stdout == "stand-in upstream\n"


def test_ships_the_library_its_makefile_built(stand_in: StandIn) -> None:
    out = stand_in.out
    assert os.readlink(out / "libnvidia-ml.so.1") == f"libnvidia-ml.so.{DRIVER}"
    assert os.readlink(out / "libnvidia-ml.so") == "libnvidia-ml.so.1"
    readelf = ["readelf", "-d", str(out / "libnvidia-ml.so.1")]
    dynamic = subprocess.run(readelf, capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libnvidia-ml.so.1]" in dynamic
    lib = ctypes.CDLL(str(out / "libnvidia-ml.so.1"))
    for i, (name, target) in enumerate(ALIASES.items()):
        assert getattr(lib, name)() == i, f"{name} does not reach {target}"


def test_a_cached_build_is_reused_without_go(stand_in: StandIn) -> None:
    again = build(stand_in.script, stand_in.cache, GO="/nonexistent/go")
    assert output_dir(again) == stand_in.out


def test_a_tarball_with_another_digest_is_refused(stand_in: StandIn) -> None:
    """The real pin against the stand-in: one line says so, and nothing is built."""
    cache = stand_in.root / "refused-cache"
    result = build(
        HACK / "upstream" / "build.sh", cache, ALLOCWATCH_UPSTREAM_TARBALL=str(stand_in.tarball)
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"build.sh: {stand_in.tarball} has sha256 {stand_in.digest}, not the pinned "
        f"{PIN['tarball_sha256']} (hack/upstream/VERSION); refusing to build it\n"
    )
    assert not (cache / "upstream").exists()


def test_the_image_build_checks_the_same_pin(stand_in: StandIn) -> None:
    """--image (everything the nvml-mock image needs) takes its source the same way."""
    cache = stand_in.root / "refused-image-cache"
    result = build(
        HACK / "upstream" / "build.sh",
        cache,
        "--image",
        ALLOCWATCH_UPSTREAM_TARBALL=str(stand_in.tarball),
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"has sha256 {stand_in.digest}, not the pinned {PIN['tarball_sha256']}" in (
        result.stderr
    )
    assert not (cache / "upstream").exists()


def test_the_image_build_is_not_served_the_tools_build(stand_in: StandIn) -> None:
    """The two builds share the source and its key but not their output."""
    result = build(stand_in.script, stand_in.cache, "--image", GO="/nonexistent/go")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "no working Go toolchain" in result.stderr


def test_an_unknown_argument_is_refused(stand_in: StandIn) -> None:
    result = build(stand_in.script, stand_in.cache, "--all")
    assert result.returncode == 1
    assert result.stderr == "usage: build.sh [--image]\n"


def test_a_changed_tarball_is_refused_even_with_a_warm_cache(stand_in: StandIn) -> None:
    changed = stand_in.root / "changed" / PIN["tarball"]
    changed.parent.mkdir()
    changed.write_bytes(stand_in.tarball.read_bytes() + b"\0")
    result = build(stand_in.script, stand_in.cache, ALLOCWATCH_UPSTREAM_TARBALL=str(changed))
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"not the pinned {stand_in.digest}" in result.stderr


def test_a_changed_recipe_is_not_served_from_the_cache(stand_in: StandIn) -> None:
    """Another VERSION (or build.sh) builds afresh: here, without Go, it cannot."""
    script = hack_copy(
        stand_in.root / "recipe",
        tarball_sha256=stand_in.digest,
        repository="https://example.invalid/another-recipe",
    )
    result = build(
        script,
        stand_in.cache,
        GO="/nonexistent/go",
        ALLOCWATCH_UPSTREAM_TARBALL=str(stand_in.tarball),
    )
    assert result.returncode == 1, result.stdout
    assert "no working Go toolchain (/nonexistent/go" in result.stderr


def test_a_named_tarball_that_is_missing_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.tar.gz"
    result = build(
        HACK / "upstream" / "build.sh", tmp_path / "cache", ALLOCWATCH_UPSTREAM_TARBALL=str(missing)
    )
    assert result.returncode == 1
    assert result.stderr == f"build.sh: ALLOCWATCH_UPSTREAM_TARBALL={missing}: no such file\n"


def test_without_a_tarball_it_clones_the_pinned_commit(stand_in: StandIn) -> None:
    origin = stand_in.root / "origin"
    commit = git_repo_of(stand_in.root / "tree", origin)
    # no shared/upstream/ beside this copy
    script = hack_copy(stand_in.root / "clone" / "repo", commit=commit)
    url = f"file://{origin}"
    out = output_dir(build(script, stand_in.cache, ALLOCWATCH_UPSTREAM_GIT=url))
    assert out.name.startswith(f"git-{commit[:12]}-")
    assert (out / "SOURCE").read_text() == f"{url}@{commit}\n"
    # the pinned commit, not the branch head after it
    cli = subprocess.run([str(out / "nvml-mock-ctl")], capture_output=True, text=True, check=True)
    assert cli.stdout == "stand-in upstream\n"
    assert os.readlink(out / "libnvidia-ml.so.1") == f"libnvidia-ml.so.{DRIVER}"


def test_a_repository_without_the_pinned_commit_fails_clearly(stand_in: StandIn) -> None:
    origin = stand_in.root / "unpinned"
    git_repo_of(stand_in.root / "tree", origin)
    script = hack_copy(stand_in.root / "unpinned-clone" / "repo")
    cache = stand_in.root / "unpinned-cache"
    result = build(script, cache, ALLOCWATCH_UPSTREAM_GIT=f"file://{origin}")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"build.sh: cannot fetch {PIN['commit']} from file://{origin} "
        "(no tarball at ../shared/upstream/ either)"
    )
    assert not list((cache / "upstream").glob("git-*"))


def test_no_working_go_exits_1_saying_so(stand_in: StandIn, tmp_path: Path) -> None:
    result = build(stand_in.script, tmp_path / "cache", GO="/nonexistent/go")
    assert result.returncode == 1
    assert "no working Go toolchain (/nonexistent/go" in result.stderr
    assert result.stdout == ""
