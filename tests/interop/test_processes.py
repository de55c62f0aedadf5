"""Issue 35: the claims we publish as processes are what NVML callers read.

The real mock libnvidia-ml.so runs in a probe process (as in test_nvml) over a
profile that carries its own process lists. While a claim is held, the
compute-process list of its GPU and the names nvmlSystemGetProcessName gives
are exactly our entries; after release, and after SIGTERM, the profile's own
lists show again.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.documents import load, memory
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.upstream import REPO, Upstream
from tests.conftest import A100_HALF, A100_UUIDS
from tests.interop.probe import Probe
from tests.support import START_SECONDS

pytestmark = pytest.mark.timing

MIB = 2**20
# The profile's own processes: one on GPU 0, two on GPU 3.
OWN = {
    0: [{"pid": 4242, "type": "C", "name": "profile/zero", "used_memory_mib": 100}],
    3: [
        {"pid": 4343, "type": "C", "name": "profile/three-a", "used_memory_mib": 200},
        {"pid": 4444, "type": "C", "name": "profile/three-b", "used_memory_mib": 300},
    ],
}
LONG_POD = "p" * 253  # the longest pod name Kubernetes allows


def as_read(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A document's entries as the probe reads them back through NVML."""
    return [
        {"pid": e["pid"], "used_bytes": e["used_memory_mib"] * MIB, "name": e["name"]}
        for e in entries
    ]


def profile_lists() -> list[list[dict[str, Any]]]:
    return [sorted(as_read(OWN.get(i, [])), key=lambda e: e["pid"]) for i in range(8)]


def by_pid(processes: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    return [sorted(device, key=lambda e: e["pid"]) for device in processes]


@pytest.fixture
def own_config_dir(config_dir: Path) -> Path:
    profile = yaml.safe_load((config_dir / "config.yaml").read_text())
    for entry in profile["devices"]:
        if entry["index"] in OWN:
            entry["processes"] = OWN[entry["index"]]
    (config_dir / "config.yaml").write_text(yaml.safe_dump(profile))
    return config_dir


@pytest.fixture
def probe(upstream: Upstream, own_config_dir: Path, tmp_path: Path) -> Iterator[Probe]:
    p = Probe(
        upstream,
        own_config_dir / "config.yaml",
        own_config_dir / "overrides.yaml",
        tmp_path / "nvml.log",
    )
    try:
        yield p
    finally:
        p.close()


def wait_processes(probe: Probe, want: list[list[dict[str, Any]]], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        out = probe.read_processes()
        if by_pid(out["processes"]) == by_pid(want):
            return out
        assert time.monotonic() < deadline, f"NVML reads {out['processes']}, want {want}"
        time.sleep(0.01)


def published(overrides: Path) -> dict[int, list[dict[str, Any]]]:
    devices = load(overrides).get("devices") or {}
    return {int(k): v["processes"] for k, v in devices.items() if "processes" in (v or {})}


def with_ours(ours: dict[int, list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Claimed devices show exactly our list; the others keep the profile's."""
    own = profile_lists()
    return [as_read(ours[i]) if i in ours else own[i] for i in range(8)]


def trainer_read() -> dict[str, Any]:
    """ml/trainer/app's one claim on GPU 0, derived here, as NVML reads it."""
    identity = "\0".join(("ml", "trainer", "app", "nvidia.com/gpu", A100_UUIDS[0]))
    digest = hashlib.blake2b(identity.encode(), digest_size=8).digest()
    pid = 10_000_000 + int.from_bytes(digest, "big") % 90_000_000  # the documented pid
    used = A100_HALF // MIB * MIB
    return {"pid": pid, "used_bytes": used, "name": "ml/trainer/app"}


def test_nvml_reads_our_processes_then_the_profiles_again(
    probe: Probe, own_config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    overrides = own_config_dir / "overrides.yaml"
    wait_processes(probe, profile_lists(), timeout=5)

    watcher = subprocess.Popen(
        [
            sys.executable, "-m", "allocwatch",
            "--socket", kubelet.socket_path,
            "--config", str(own_config_dir / "config.yaml"),
            "--overrides", str(overrides),
            "--interval", "100ms",
            "--metrics-address", "",
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        # Up and publishing (every device idle) before the timed part: its start
        # is as slow as the machine is busy.
        deadline = time.monotonic() + START_SECONDS
        while len(memory(load(overrides))) != 8:
            assert time.monotonic() < deadline, f"the watcher did not publish: {load(overrides)}"
            time.sleep(0.01)
        kubelet.set_pods(
            [
                gpu_pod("ml", "trainer", [A100_UUIDS[0]], container="app"),
                gpu_pod("ml", "a", [A100_UUIDS[3]]),
                gpu_pod("ml", LONG_POD, [A100_UUIDS[3]], container="c" * 63),
                gpu_pod("team", "solo", [A100_UUIDS[5] + "::1"]),
            ]
        )
        deadline = time.monotonic() + 10
        while set(published(overrides)) != {0, 3, 5}:
            assert time.monotonic() < deadline, f"published {published(overrides)}"
            time.sleep(0.01)
        out = wait_processes(probe, with_ours(published(overrides)), timeout=10)

        # Exactly our entries, derived independently: pid, MiB, names (one cut).
        assert out["processes"][0] == [trainer_read()]
        long_name = ("ml/" + LONG_POD + "/" + "c" * 63)[:255]
        assert sorted(e["name"] for e in out["processes"][3]) == sorted(["ml/a/main", long_name])
        assert len({e["pid"] for e in out["processes"][3]}) == 2
        assert [e["name"] for e in out["processes"][5]] == ["team/solo/main"]
        # The mock's count-only quirk: pynvml's own wrapper sees no process at all.
        assert out["pynvml"][0] == 0

        # The claims that stay keep their pids.
        solo = published(overrides)[5]
        kubelet.set_pods([gpu_pod("team", "solo", [A100_UUIDS[5] + "::1"])])
        wait_processes(probe, with_ours({5: solo}), timeout=10)
        kubelet.set_pods([])
        wait_processes(probe, profile_lists(), timeout=10)
        assert published(overrides) == {}

        kubelet.set_pods([gpu_pod("ml", "trainer", [A100_UUIDS[0]], container="app")])
        wait_processes(probe, [[trainer_read()], *profile_lists()[1:]], timeout=10)
    finally:
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=10)
    assert watcher.returncode == 0, err
    assert published(overrides) == {}
    wait_processes(probe, profile_lists(), timeout=5)


def test_the_mock_refuses_a_name_longer_than_the_buffer_where_nvml_crops_it(
    probe: Probe, own_config_dir: Path
) -> None:
    """Why names are cut to 255 bytes: through go-nvml's 256-byte buffer the mock
    answers a 256-byte name with NVML_ERROR_INSUFFICIENT_SIZE (7), not a cropped name."""
    entries = [
        {"pid": 111111111, "type": "C", "name": "a" * 255, "used_memory_mib": 1},
        {"pid": 222222222, "type": "C", "name": "b" * 256, "used_memory_mib": 1},
    ]
    (own_config_dir / "overrides.yaml").write_text(
        yaml.safe_dump({"version": 1, "devices": {"1": {"processes": entries}}})
    )
    read = [
        {"pid": 111111111, "used_bytes": MIB, "name": "a" * 255},
        {"pid": 222222222, "used_bytes": MIB, "name": 7},
    ]
    own = profile_lists()
    wait_processes(probe, [own[0], read, *own[2:]], timeout=5)
