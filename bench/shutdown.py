"""How soon a starting watcher exits on SIGTERM (`make bench-shutdown`).

Starts `python -m allocwatch` against a socket that does not exist, so the
startup dial keeps retrying through grpc's first seconds, sends SIGTERM at a
random moment 0.6-1.8 s after the start, and times the exit. Prints the
median, p90 and maximum, and how many runs took over a second.
"""

from __future__ import annotations

import argparse
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def one_run(workdir: Path, delay: float) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-m", "allocwatch", "--socket", str(workdir / "absent.sock"),
         "--driver-root", str(workdir / "driver"), "--metrics-address", "",
         "--dial-timeout", "30s"],
        stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    time.sleep(delay)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode} after SIGTERM:\n{err}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None, help="for the signal times")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="aw-shutdown-") as tmp:
        took = sorted(one_run(Path(tmp), rng.uniform(0.6, 1.8)) for _ in range(args.runs))
    print(f"SIGTERM 0.6-1.8 s after start, {args.runs} runs (no kubelet: the dial retries):\n")
    print("| median | p90 | max | over 1 s |")
    print("|---|---|---|---|")
    p90 = took[min(len(took) - 1, int(len(took) * 0.9))]
    over = sum(t > 1.0 for t in took)
    print(f"| {statistics.median(took):.3f} s | {p90:.3f} s | {took[-1]:.3f} s | {over} |")


if __name__ == "__main__":
    main()
