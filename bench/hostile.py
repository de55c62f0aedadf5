"""What a hostile or huge file costs the watcher (`make bench-hostile`).

For each file, runs `python -m allocwatch` at a 500 ms interval against a
fake kubelet with one claim, the file in place of the override file (or of
the profile), for a few seconds; then sends SIGTERM. Prints, per file: the
mean and longest poll (from the watcher's own poll histogram), the polls
made, the share of a core used, the peak RSS, and how long the exit took
and its code; then, in a second run, how long the exit takes when SIGTERM
comes just as the first poll starts, in the middle of reading the file.
`--repo` runs another checkout's watcher (to compare before and after a
change) with this script's files and kubelet.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bench.launch import kill_if_running, start_watcher
from bench.proc import cpu_seconds, peak_rss_mib
from devtools.podresources import FakePodResourcesLister, gpu_pod

REPO = Path(__file__).resolve().parent.parent
PROFILE = REPO / "tests" / "data" / "a100.yaml"
A100_UUID0 = "GPU-12345678-1234-1234-1234-123456780000"  # tests/data/a100.yaml, device 0


def keys(n: int) -> str:
    return "all:\n" + "".join(f"  k{i:07d}: 1\n" for i in range(n))


def big_string(size: int) -> str:
    return "all:\n  blob: '" + "x" * size + "'\n"


def at_the_bounds() -> str:
    """Near both bounds and written back within them: 19,990 nodes, a string to ~1 MiB."""
    items = "".join("  - 1\n" for _ in range(19_990))
    head = "all:\n k:\n" + items + " blob: '"
    return head + "x" * (1_000_000 - len(head)) + "'\n"


# name -> (which file, its text)
FILES: dict[str, tuple[str, Callable[[], str]]] = {
    "overrides: 832k keys, 50 MB": ("overrides", lambda: keys(832_000)),
    "overrides: valid, one 50 MB string": ("overrides", lambda: big_string(50_000_000)),
    "overrides: 200k keys, 3.4 MB": ("overrides", lambda: keys(200_000)),
    "overrides: at both bounds (1 MiB, 19,990 nodes)": ("overrides", at_the_bounds),
    "profile: 832k keys, 50 MB": ("profile", lambda: keys(832_000)),
}


def poll_times(port: int) -> tuple[float, float, float]:
    """(polls, mean seconds, upper bound of the slowest bucket) from the poll histogram."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    values = dict(re.findall(r"^(allocwatch_poll_duration_seconds_\S+) (\S+)$", text, re.M))
    count = float(values["allocwatch_poll_duration_seconds_count"])
    total = float(values["allocwatch_poll_duration_seconds_sum"])
    buckets = sorted(
        (float(le), float(v))
        for le, v in re.findall(r'_bucket\{le="([^"]+)"\} (\S+)', text)
        if le != "+Inf"
    )
    slowest = next((le for le, v in buckets if v >= count), float("inf"))
    return count, total / count if count else 0.0, slowest


def timed_exit(proc: subprocess.Popen[str]) -> tuple[int, float]:
    """SIGTERM; the exit code and the seconds until the exit."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    return code, time.monotonic() - sent


def measure(
    repo: Path, kubelet: FakePodResourcesLister, which: str, text: str, seconds: float
) -> str:
    with tempfile.TemporaryDirectory(prefix="aw-hostile-") as tmp:
        root = Path(tmp) / "driver"
        (root / "config").mkdir(parents=True)
        profile = root / "config" / "config.yaml"
        if which == "profile":
            profile.write_text(text)
        else:
            shutil.copy(PROFILE, profile)
            (root / "config" / "overrides.yaml").write_text(text)
        proc, port = start_watcher(kubelet, root, "500ms", repo)
        try:
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(seconds)
            polls, mean, slowest = poll_times(port)
            core = (cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
            rss = peak_rss_mib(proc.pid)
            code, took = timed_exit(proc)
        finally:
            kill_if_running(proc)
        proc, _ = start_watcher(kubelet, root, "500ms", repo)
        try:
            time.sleep(0.05)  # the first poll has begun: the port is logged just before it
            early_code, early = timed_exit(proc)
        finally:
            kill_if_running(proc)
    return (
        f"| {int(polls)} | {mean * 1000:.0f} ms | <= {slowest:g} s | {core * 100:.0f} % "
        f"| {rss:.1f} MiB | {took:.2f} s | {code} | {early:.2f} s | {early_code} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0, help="run time per file")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose watcher runs")
    args = parser.parse_args()
    print(f"watcher from {args.repo.name}, {args.seconds:g} s per file, 500 ms interval\n")
    print(
        "| file | polls | mean poll | slowest poll | core | peak RSS | exit took | exit code "
        "| exit in 1st poll | its code |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with (
        tempfile.TemporaryDirectory(prefix="aw-hostile-k-") as ktmp,
        FakePodResourcesLister(Path(ktmp) / "k.sock") as kubelet,
    ):
        kubelet.set_pods([gpu_pod("ml", "t", [A100_UUID0])])
        for name, (which, make) in FILES.items():
            row = measure(args.repo.resolve(), kubelet, which, make(), args.seconds)
            print(f"| {name} {row}", flush=True)


if __name__ == "__main__":
    main()
