"""What each Kubernetes client library costs to import (`make bench-kubeclients`).

For each candidate, a fresh venv with only that pinned release (from the
package index), and in it `--runs` processes that import what a list+watch
of pods needs, after one run that is thrown away (it warms the page cache).
Each process times its own imports (wall and CPU) and reads its resident
memory from /proc/self/status right after them; "python alone" is the same
interpreter importing nothing. Prints medians, with the spread of the runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Candidate:
    name: str
    requirement: str
    imports: str  # what a list+watch of pods needs from it


# lightkube's are the imports allocwatch.podwatch makes when the option is on.
CANDIDATES = [
    Candidate(
        "lightkube",
        "lightkube==1.0.1",
        "import httpx2; from lightkube import AsyncClient, KubeConfig; "
        "from lightkube.config.client_adapter import verify_cluster; "
        "from lightkube.resources.core_v1 import Pod",
    ),
    Candidate("kr8s", "kr8s==0.20.15", "import kr8s; from kr8s.objects import Pod"),
    Candidate("kubernetes", "kubernetes==37.0.3", "from kubernetes import client, config, watch"),
]

CHILD = """
import json, time
wall, cpu = time.perf_counter(), time.process_time()
{imports}
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
import sys
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
kib = lambda key: int(status[key].split()[0])
print(json.dumps({{"wall": wall, "cpu": cpu, "rss": kib("VmRSS"), "anon": kib("RssAnon"),
                  "modules": len(sys.modules)}}))
"""


def venv(root: Path, requirement: str | None) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    if requirement:
        # pip byte-compiles what it installs, as the image's install does
        subprocess.run([str(root / "bin" / "pip"), "install", "-q", requirement], check=True)
    return root / "bin" / "python"


def measure(python: Path, imports: str, runs: int, cwd: Path) -> list[dict[str, float]]:
    code = CHILD.format(imports=imports or "pass")
    out = []
    for _ in range(runs + 1):
        proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd)
        if proc.returncode != 0:
            raise RuntimeError(f"{python} -c ...{imports}: {proc.stderr.strip()}")
        out.append(json.loads(proc.stdout))
    return out[1:]


def installed_mib(python: Path) -> float:
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    skip = ("pip", "setuptools", "_distutils_hack", "pkg_resources")
    files = (
        p
        for p in site.rglob("*")
        if p.is_file() and not p.relative_to(site).parts[0].startswith(skip)
    )
    return sum(p.stat().st_size for p in files) / 2**20


def row(name: str, runs: list[dict[str, float]], size: float | None) -> str:
    def spread(key: str, scale: float, fmt: str) -> str:
        values = sorted(r[key] * scale for r in runs)
        return f"{statistics.median(values):{fmt}} ({values[0]:{fmt}}-{values[-1]:{fmt}})"

    cells = [
        name,
        spread("wall", 1000, ".0f") + " ms",
        spread("cpu", 1000, ".0f") + " ms",
        spread("rss", 1 / 1024, ".1f") + " MiB",
        spread("anon", 1 / 1024, ".1f") + " MiB",
        f"{statistics.median(r['modules'] for r in runs):.0f}",
        "" if size is None else f"{size:.1f} MiB",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--only", action="append", help="a candidate's name (repeatable)")
    args = parser.parse_args()
    chosen = [c for c in CANDIDATES if not args.only or c.name in args.only]
    rows = []
    with tempfile.TemporaryDirectory(prefix="aw-kubeclients-") as tmp:
        root = Path(tmp)
        for c in chosen:
            print(f"  installing {c.requirement} into a fresh venv", file=sys.stderr, flush=True)
            python = venv(root / c.name, c.requirement)
            if not rows:  # the same interpreter, importing nothing
                rows.append(row("python alone", measure(python, "", args.runs, root), None))
            print(f"  {args.runs} runs of its imports", file=sys.stderr, flush=True)
            measured = measure(python, c.imports, args.runs, root)
            rows.append(row(f"{c.requirement}", measured, installed_mib(python)))
    print(f"\nImports a pod list+watch needs; median (min-max) of {args.runs} runs, "
          f"Python {sys.version.split()[0]}:\n")  # fmt: skip
    print(
        "| library | import wall | import CPU | RSS after | of it anonymous | modules | installed |"
    )
    print("|---|---|---|---|---|---|---|")
    for line in rows:
        print(line)
    print("\nImports:")
    for c in chosen:
        print(f"- {c.name}: `{c.imports}`")


if __name__ == "__main__":
    main()
