"""The package's shape: no import cycles, grpc only where the kubelet is spoken to, and no
API that only the tests use."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

PACKAGE = REPO_ROOT / "allocwatch"


def _imports() -> dict[str, set[str]]:
    """Each module of the package (generated stubs aside) -> the package modules it imports."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        name = f"allocwatch.{path.stem}" if path.stem != "__init__" else "allocwatch"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "allocwatch":
                    found |= {f"allocwatch.{alias.name}" for alias in node.names}
                else:
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        graph[name] = {m for m in found if m.startswith("allocwatch.") and "kubeletapi" not in m}
    return graph


def test_no_module_of_the_package_imports_itself_back() -> None:
    graph = _imports()
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            module = todo.pop()
            assert module != start, f"{start} imports itself through {sorted(seen)}"
            if module not in seen and module in graph:
                seen.add(module)
                todo.extend(graph[module])


@pytest.mark.parametrize(
    "module",
    [
        "allocwatch.watch",
        "allocwatch.claims",
        "allocwatch.reconcile",
        "allocwatch.processes",
        "allocwatch.profile",
        "allocwatch.document",
        "allocwatch.ownedkeys",
        "allocwatch.publisher",
    ],
)
def test_the_loop_and_the_core_do_not_load_grpc(module: str) -> None:
    code = f"import sys, {module}; sys.exit('grpc' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# Names the standard library or a dependency calls or sets on our objects.
FRAMEWORK_HOOKS = frozenset(
    {
        "ignore_aliases",  # PyYAML's Dumper
        "do_GET",  # http.server
        "do_HEAD",
        "log_message",
        "rfile",
        "client_address",
        "logProcesses",  # logging
        "logThreads",
        "logMultiprocessing",
        "converter",
    }
)


def test_every_name_the_package_defines_is_used_by_the_package() -> None:
    """A function, class, method or attribute only the tests read is test-only API."""
    defined: dict[str, str] = {}
    read: set[str] = set()
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.setdefault(node.name, path.name)
            elif isinstance(node, ast.Attribute):
                if isinstance(node.ctx, ast.Store):
                    defined.setdefault(node.attr, path.name)
                else:
                    read.add(node.attr)
            elif isinstance(node, ast.Name):
                read.add(node.id)
            elif isinstance(node, ast.alias):
                read.add(node.name)
    unread = {
        name: where
        for name, where in defined.items()
        if name not in read and not name.startswith("__") and name not in FRAMEWORK_HOOKS
    }
    assert not unread, f"defined but never used by the package: {unread}"
