#!/usr/bin/env bash
# Runs the tests that wait on time, signals, threads or another process
# (pytest marker `timing`, interop included) again and again with the CPUs
# busy, and reports every failure with the load it ran under. A test that
# passes only at one speed fails here, or on a quiet machine with
# STRESS_CPU=0.
#
#   STRESS_RUNS   how many times to run them (20)
#   STRESS_CPU    stress-ng CPU workers beside them (default: one per core;
#                 0: no load, a quiet run; 20 makes a load average near 20
#                 on two cores)
#   STRESS_TESTS  what pytest runs (default: -m timing tests)
#   STRESS_OUT    where each run's log and JUnit XML go (default: a new
#                 temporary directory, printed)
#   PYTHON        the Python with the project installed (.venv/bin/python)
#
# stress-ng comes from Debian: installed here (as root) when missing.
# Exit codes: 0 every run passed; 1 a run failed (the report says which
# tests, how, and at what load) or something else went wrong.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/common.sh
. "$here/common.sh"
LOG_NAME=test-stress
cd "$here/.."

runs=${STRESS_RUNS:-20}
cpu=${STRESS_CPU:-$(nproc)}
read -r -a tests <<<"${STRESS_TESTS:--m timing tests}"
python=${PYTHON:-.venv/bin/python}
out=${STRESS_OUT:-$(mktemp -d -t allocwatch-stress.XXXXXX)}
mkdir -p "$out"

[[ $runs =~ ^[1-9][0-9]*$ ]] || die "STRESS_RUNS=$runs is not a positive number"
[[ $cpu =~ ^[0-9]+$ ]] || die "STRESS_CPU=$cpu is not a number"

stress=
if [ "$cpu" -gt 0 ]; then
  if ! command -v stress-ng >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "stress-ng is missing (apt-get install stress-ng)"
    log "installing stress-ng"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends stress-ng >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq --no-install-recommends stress-ng >/dev/null; }
  fi
  stress-ng --cpu "$cpu" --cpu-load 100 --timeout 0 --quiet &
  stress=$!
  trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
  # the load average takes a minute to rise; the first runs are loaded all the same
  sleep 2
fi

log "$runs runs of pytest ${tests[*]} beside $cpu stress-ng CPU workers; logs in $out"
failed=0
for i in $(seq 1 "$runs"); do
  begin=$(cut -d' ' -f1 /proc/loadavg)
  started=$(date +%s)
  rc=0
  CI=${CI:-1} "$python" -m pytest "${tests[@]}" -q -p no:cacheprovider \
    --junitxml="$out/run-$i.xml" >"$out/run-$i.log" 2>&1 || rc=$?
  end=$(cut -d' ' -f1 /proc/loadavg)
  echo "$i $rc $begin $end $(( $(date +%s) - started ))" >>"$out/runs"
  summary=$(tail -n 1 "$out/run-$i.log")
  log "run $i/$runs: exit $rc, load $begin -> $end, $(( $(date +%s) - started ))s: $summary"
  [ "$rc" = 0 ] || failed=$((failed + 1))
done

"$python" - "$out" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

out = Path(sys.argv[1])
runs = [line.split() for line in (out / "runs").read_text().splitlines()]
seen: dict[str, int] = defaultdict(int)
failures: dict[str, list[str]] = defaultdict(list)
for number, rc, begin, end, seconds in runs:
    xml = out / f"run-{number}.xml"
    if not xml.exists():
        failures["(no report)"].append(f"run {number}: exit {rc}, see run-{number}.log")
        continue
    for case in ET.parse(xml).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        seen[test] += 1
        for bad in [*case.iter("failure"), *case.iter("error")]:
            text = (bad.get("message") or bad.text or "").strip().splitlines() or [""]
            failures[test].append(f"run {number}, load {begin} -> {end}: {text[0][:300]}")
print(f"\n{len(runs)} runs of {len(seen)} tests; logs in {out}")
if not failures:
    print("no failures")
for test, lines in sorted(failures.items()):
    print(f"{test}: failed {len(lines)} of {seen.get(test, len(runs))}")
    for line in lines:
        print(f"  {line}")
EOF
[ "$failed" = 0 ] || die "$failed of $runs runs failed"
