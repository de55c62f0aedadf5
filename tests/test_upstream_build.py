"""hack/upstream/build.sh against a stand-in for the upstream module.

The real module is not served by the Go module proxy here, so these tests
serve a small module of the same path and commit from a file-based proxy,
shaped as upstream ships it: a committed vendor/ (of which a module zip keeps
only vendor/modules.txt), a dependency, the CLI's main package and the
c-shared bridge. They run the script's whole proxy path: resolving the commit
to its pseudo-version, building both, linking the library as upstream's
Makefile does, and reusing the cached build.
"""

from __future__ import annotations

import ctypes
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.upstream import BUILD_SCRIPT, EXIT_NOT_SERVED

PIN = dict(
    line.split("=", 1)
    for line in (BUILD_SCRIPT.parent / "VERSION").read_text().splitlines()
    if line and not line.startswith("#")
)
MODULE, COMMIT, DRIVER = PIN["module"], PIN["commit"], PIN["driver_version"]
PSEUDO_VERSION = f"v0.0.0-20260821000000-{COMMIT[:12]}"
DEP, DEP_VERSION = "example.invalid/nvmlmockdep", "v1.0.0"
# The unversioned NVML names build.sh aliases to versioned symbols.
ALIASES = dict(re.findall(r"^\s+(nvml\w+)=(nvml\w+)$", BUILD_SCRIPT.read_text(), re.M))
GO = shutil.which("go") or "/usr/local/go/bin/go"


def escape(path: str) -> str:
    """The module proxy's case encoding: an upper-case letter becomes `!` and its lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group().lower(), path)


def serve(
    proxy: Path, module: str, version: str, tree: Path, queries: tuple[str, ...] = ()
) -> None:
    """Publish `tree` as module@version in a file-based proxy, as a module zip holds it."""
    versions = proxy / escape(module) / "@v"
    versions.mkdir(parents=True, exist_ok=True)
    info = json.dumps({"Version": version, "Time": "2026-08-21T00:00:00Z"})
    for name in (version, *queries):
        (versions / f"{name}.info").write_text(info)
    (versions / "list").write_text(version + "\n")
    shutil.copy(tree / "go.mod", versions / f"{version}.mod")
    with zipfile.ZipFile(versions / f"{version}.zip", "w") as z:
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            rel = path.relative_to(tree).as_posix()
            if rel.startswith("vendor/") and rel != "vendor/modules.txt":
                continue  # what the go command leaves out of a module zip
            z.write(path, f"{module}@{version}/{rel}")


def go_env(proxy: str, cache: Path) -> dict[str, str]:
    env = dict(os.environ, GOPROXY=proxy, GOSUMDB="off", GOTOOLCHAIN="local")
    env.update(GOMODCACHE=str(cache / "go" / "mod"), GOCACHE=str(cache / "go" / "build"))
    env.pop("GOFLAGS", None)
    return env


def stand_in(root: Path) -> Path:
    """A file-based proxy serving the dependency and the upstream stand-in."""
    proxy = root / "proxy"
    dep = root / "dep"
    dep.mkdir()
    (dep / "go.mod").write_text(f"module {DEP}\n\ngo 1.22\n")
    (dep / "dep.go").write_text(
        'package nvmlmockdep\n\nfunc Name() string { return "stand-in upstream" }\n'
    )
    serve(proxy, DEP, DEP_VERSION, dep)

    up = root / "upstream"
    (up / "cmd" / "nvml-mock-ctl").mkdir(parents=True)
    (up / "pkg" / "gpu" / "mocknvml" / "bridge").mkdir(parents=True)
    (up / "go.mod").write_text(f"module {MODULE}\n\ngo 1.22\n\nrequire {DEP} {DEP_VERSION}\n")
    (up / "cmd" / "nvml-mock-ctl" / "main.go").write_text(
        f'package main\n\nimport (\n\t"fmt"\n\n\tdep "{DEP}"\n)\n\n'
        "func main() { fmt.Println(dep.Name()) }\n"
    )
    # Each versioned symbol returns its position in the alias table, so a
    # call through the unversioned name shows which symbol it reached.
    exports = "".join(
        f"//export {target}\nfunc {target}() C.int {{ return {i} }}\n\n"
        for i, target in enumerate(ALIASES.values())
    )
    (up / "pkg" / "gpu" / "mocknvml" / "bridge" / "bridge.go").write_text(
        f'package main\n\nimport "C"\n\nimport dep "{DEP}"\n\n{exports}'
        "var _ = dep.Name\n\nfunc main() {}\n"
    )
    # its own module cache, so that build.sh fetches the dependency itself
    env = go_env(f"file://{proxy}", root / "scratch")
    for args in (["mod", "tidy"], ["mod", "vendor"]):
        subprocess.run([GO, *args], cwd=up, env=env, check=True, capture_output=True)
    serve(proxy, MODULE, PSEUDO_VERSION, up, queries=(COMMIT,))
    return proxy


def build(
    cache: Path, proxy: str, script: Path = BUILD_SCRIPT, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script)],
        env=go_env(proxy, cache) | {"ALLOCWATCH_CACHE": str(cache), "GO": GO} | env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(cache, output directory) after one build from the stand-in."""
    if not os.access(GO, os.X_OK):
        pytest.fail("these tests need Go: put `go` on PATH (CI installs it in .ci/run)")
    root = tmp_path_factory.mktemp("upstream-build")
    cache = root / "cache"
    result = build(cache, f"file://{stand_in(root)}")
    assert result.returncode == 0, result.stderr
    yield cache, Path(result.stdout.strip().splitlines()[-1])
    # the module cache is read-only, as the go command leaves it
    subprocess.run(["chmod", "-R", "u+w", str(root)], check=False)


def test_builds_from_the_pinned_commit_through_the_proxy(built: tuple[Path, Path]) -> None:
    cache, out = built
    assert out.parent == cache / "upstream" and out.name.startswith(f"{PSEUDO_VERSION}-")
    assert (cache / "upstream" / f"commit-{COMMIT}").read_text().strip() == PSEUDO_VERSION
    assert (out / "SOURCE").read_text().strip() == f"{MODULE}@{PSEUDO_VERSION} ({COMMIT})"
    cli = subprocess.run([str(out / "nvml-mock-ctl")], capture_output=True, text=True, check=True)
    assert cli.stdout == "stand-in upstream\n"


def test_links_the_library_as_upstream_does(built: tuple[Path, Path]) -> None:
    _, out = built
    assert os.readlink(out / "libnvidia-ml.so.1") == f"libnvidia-ml.so.{DRIVER}"
    assert os.readlink(out / "libnvidia-ml.so") == "libnvidia-ml.so.1"
    readelf = ["readelf", "-d", str(out / "libnvidia-ml.so.1")]
    dynamic = subprocess.run(readelf, capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libnvidia-ml.so.1]" in dynamic
    lib = ctypes.CDLL(str(out / "libnvidia-ml.so.1"))
    assert len(ALIASES) == 14
    for i, (name, target) in enumerate(ALIASES.items()):
        assert getattr(lib, name)() == i, f"{name} does not reach {target}"


def test_a_cached_build_is_reused_without_go_or_the_proxy(built: tuple[Path, Path]) -> None:
    cache, out = built
    again = build(cache, "off", GO="/nonexistent/go")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(out)


def test_a_changed_recipe_is_not_served_from_the_cache(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """A new driver version (or build.sh) builds afresh: here, without Go, it cannot."""
    cache, _ = built
    hack = tmp_path / "hack"
    shutil.copytree(BUILD_SCRIPT.parent, hack / "upstream")
    shutil.copy(BUILD_SCRIPT.parent.parent / "cache-dir.sh", hack / "cache-dir.sh")
    pins = hack / "upstream" / "VERSION"
    pins.write_text(pins.read_text().replace(f"driver_version={DRIVER}", "driver_version=1.2.3"))
    again = build(cache, "off", script=hack / "upstream" / "build.sh", GO="/nonexistent/go")
    assert again.returncode == 1, again.stdout
    assert "no working Go toolchain" in again.stderr


def test_no_working_go_exits_1_saying_so(tmp_path: Path) -> None:
    result = build(tmp_path / "cache", "off", GO="/nonexistent/go")
    assert result.returncode == 1
    assert "no working Go toolchain (/nonexistent/go" in result.stderr
    assert result.stdout == ""


def test_a_proxy_that_cannot_be_asked_exits_1_not_not_served(tmp_path: Path) -> None:
    """Exit 3 means the proxy refused the module; any other failure is 1."""
    result = build(tmp_path / "cache", "off")
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=False)
    assert result.returncode == 1, result.stderr
    assert "does not serve" not in result.stderr


class _Refusing(http.server.BaseHTTPRequestHandler):
    """The module proxy's answer for a module version it does not serve."""

    def do_GET(self) -> None:
        body = b"This module version is not available.\n"
        self.send_response(403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_module_the_proxy_refuses_exits_not_served(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = build(tmp_path / "cache", f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()
        subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=False)
    assert result.returncode == EXIT_NOT_SERVED, result.stderr
    assert "does not serve" in result.stderr
    assert result.stdout == ""
