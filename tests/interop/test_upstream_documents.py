"""Issue 6, test 3: publishing over documents that nvml-mock-ctl wrote.

nvml-mock-ctl fills the file with temperature, P-state, NVLink errors, fan,
utilization (including a `null`), failure injection and a sibling key inside
`memory`. Our watcher (the CLI, `--once`) then publishes a claim state. Every
key that is not ours must come back with the same value and type, and
nvml-mock-ctl must read the result exactly as the file says.
"""

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from devtools.documents import (
    ACTIVITY,
    load,
    memory,
    processes,
    same,
    without,
    without_memory,
    without_processes,
)
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.upstream import Ctl, Upstream, allocwatch_once
from tests.conftest import A100_APERTURE, A100_HALF, A100_UUIDS

pytestmark = pytest.mark.timing


def without_our_activity(doc: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """`doc` less the activity keys the document `theirs` has no such key for: ours."""
    pinned = {
        index: [k for k in ACTIVITY if k[-1] in bucket.get("dynamic_metrics", {})]
        for index, bucket in theirs.get("devices", {}).items()
    }
    out = copy.deepcopy(doc)
    for index in list(out.get("devices", {})):
        ours = [k for k in ACTIVITY if k not in pinned.get(index, [])]
        out = without(out, ours, devices={index})
    return out


UPSTREAM_STEPS = [
    ["temp", "--gpu", "0", "85"],
    ["pstate", "--gpu", "all", "8"],
    ["nvlink-error", "--gpu", "1", "--links", "0,1", "5"],
    ["fan", "--gpu", "2", "60"],
    ["util", "--gpu", "3", "30"],
    ["fail", "--gpu", "4", "--mode", "ecc_uncorrectable", "--xid", "48"],
    ["set", "--gpu", "5", "thermal.temperature_gpu_c=70", "performance_state=P2"],
    ["set", "--gpu", "7", "memory.memory_bus_width=4096"],
]


def fingerprint(path: Path) -> tuple[int, int, bytes]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, path.read_bytes()


def test_foreign_keys_survive_and_status_agrees(
    upstream: Upstream, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    config = config_dir / "config.yaml"
    overrides = config_dir / "overrides.yaml"
    ctl = Ctl(upstream, overrides, config)
    for step in UPSTREAM_STEPS:
        ctl.ok(*step)
    theirs = load(overrides)
    assert not memory(theirs)
    # the document really carries what the steps say, in nvml-mock-ctl's own types
    assert theirs["devices"]["2"]["fan"]["speed_percent"] == "60"
    assert theirs["devices"]["3"]["dynamic_metrics"]["utilization"] is None
    assert theirs["devices"]["7"]["memory"] == {"memory_bus_width": 4096}
    assert same(ctl.status(), theirs)

    kubelet.set_pods(
        [
            gpu_pod("ml", "a", [A100_UUIDS[0]]),
            gpu_pod("ml", "b", [A100_UUIDS[1]]),
            gpu_pod("ml", "c", [A100_UUIDS[1]]),
            gpu_pod("ml", "d", [A100_UUIDS[7]]),
        ]
    )
    allocwatch_once(kubelet, config, overrides)
    ours = load(overrides)
    assert stat.S_IMODE(os.stat(overrides).st_mode) == 0o644

    # every key not ours, with equal value and type, nvml-mock-ctl's pins included
    assert same(without_our_activity(without_processes(without_memory(ours)), theirs), theirs)
    # and a process per claim on the claimed devices only
    names = {i: [p["name"] for p in entries] for i, entries in processes(ours).items()}
    assert names == {"0": ["ml/a/main"], "1": ["ml/b/main", "ml/c/main"], "7": ["ml/d/main"]}
    # and our readings for every device, as integers
    want = {str(i): {"used_bytes": 0, "free_bytes": A100_APERTURE} for i in range(8)}
    want["0"] = {"used_bytes": A100_HALF, "free_bytes": A100_APERTURE - A100_HALF}
    want["1"] = {"used_bytes": A100_APERTURE, "free_bytes": 0}
    want["7"] = {"used_bytes": A100_HALF, "free_bytes": A100_APERTURE - A100_HALF}
    assert same(memory(ours), want)
    assert ours["devices"]["7"]["memory"]["memory_bus_width"] == 4096

    # nvml-mock-ctl reads exactly that, whole and per device
    assert same(ctl.status(), ours)
    per_device = ctl.status("--gpu", "7")
    assert same(per_device["devices"], {"7": ours["devices"]["7"]})
    assert same(per_device.get("all"), ours.get("all"))

    # Nothing changed: a second publish does not touch the file.
    before = fingerprint(overrides)
    allocwatch_once(kubelet, config, overrides)
    assert fingerprint(overrides) == before

    # nvml-mock-ctl mutates on top of our values (exit 0, not 2) and keeps them...
    ctl.ok("temp", "--gpu", "1", "90")
    ctl.ok("fail", "--gpu", "4", "--mode", "healthy")
    rewritten = load(overrides)
    assert same(memory(rewritten), want)
    # ...and its go-yaml rewrite of the same values is no reason for us to write.
    before = fingerprint(overrides)
    allocwatch_once(kubelet, config, overrides)
    assert fingerprint(overrides) == before
