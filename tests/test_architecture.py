"""The package's shape: no import cycles, and grpc only where the kubelet is spoken to."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "allocwatch"


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
        "allocwatch.processkey",
        "allocwatch.publisher",
    ],
)
def test_the_loop_and_the_core_do_not_load_grpc(module: str) -> None:
    code = f"import sys, {module}; sys.exit('grpc' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
