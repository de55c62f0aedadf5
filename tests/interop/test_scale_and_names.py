"""What a busy or hostile node lists leaves upstream's real tools working.

5,000 claims: allocwatch's document stays within its own bounds, survives an
nvml-mock-ctl edit, and the mock library reads it; after release every GPU
reads idle again. Pod names with control characters: nvml-mock-ctl's status
and edits still work, its round trip keeps our names, and no fix-up write
of ours follows its edit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.documents import load, memory, processes
from devtools.podresources import FakePodResourcesLister, gpu_pod
from devtools.upstream import Ctl, Upstream
from devtools.waiting import wait_until
from tests.conftest import A100_APERTURE, A100_UUIDS
from tests.interop.probe import Probe, nvml_memory
from tests.interop.watching import watching

pytestmark = pytest.mark.timing

IDLE = {str(i): 0 for i in range(8)}


def used(overrides: Path) -> dict[str, int]:
    return {i: block["used_bytes"] for i, block in memory(load(overrides)).items()}


def test_5000_claims_survive_an_edit_and_return_to_idle(
    upstream: Upstream, config_dir: Path, kubelet: FakePodResourcesLister, tmp_path: Path
) -> None:
    overrides = config_dir / "overrides.yaml"
    ctl = Ctl(upstream, overrides, config_dir / "config.yaml")
    pods = [gpu_pod("ml", f"p{n}", [f"{A100_UUIDS[n % 8]}::{n}"]) for n in range(5000)]
    kubelet.set_pods(pods)
    full = {str(i): A100_APERTURE for i in range(8)}
    probe = Probe(upstream, config_dir / "config.yaml", overrides, tmp_path / "nvml.log")
    try:
        with watching(kubelet, config_dir) as w:
            wait_until(lambda: used(overrides) == full, 30, "5,000 claims published")
            lists = processes(load(overrides))
            assert {i: len(entries) for i, entries in lists.items()} == {
                str(i): 32 for i in range(8)
            }
            assert w.metric("allocwatch_folded_processes") == 8 * (625 - 31)
            ctl.ok("temp", "--gpu", "2", "70")  # an edit: ctl's own round trip of it all
            ctl.ok("status")
            polls = w.metric("allocwatch_polls_total")
            wait_until(lambda: w.metric("allocwatch_polls_total") > polls + 5, 30, "more polls")
            # the edited document is still ours to read and write
            assert w.metric("allocwatch_polls_total", result="publish_error") == 0
            wait_until(
                lambda: {str(i): nvml_memory(d)[0] for i, d in enumerate(probe.read())} == full,
                10,
                "NVML reads every GPU full",
            )
            kubelet.set_pods([])
            wait_until(lambda: used(overrides) == IDLE, 30, "idle again")
            wait_until(
                lambda: all(nvml_memory(d)[0] == 0 for d in probe.read()), 10, "NVML reads idle"
            )
            assert processes(load(overrides)) == {}
            assert load(overrides)["devices"]["2"]["thermal"] == {"temperature_gpu_c": 70}
            assert w.stop() == 0, "".join(w.log)
    finally:
        probe.close()


HOSTILE = ["p\x7f", "p\x9b", "p\x85", "p\ufffe", "p\uffff", "p\x00", "p\n"]


def test_hostile_names_leave_ctl_working_and_cost_no_fixup_write(
    upstream: Upstream, config_dir: Path, kubelet: FakePodResourcesLister
) -> None:
    overrides = config_dir / "overrides.yaml"
    ctl = Ctl(upstream, overrides, config_dir / "config.yaml")
    kubelet.set_pods([gpu_pod("ml", name, [A100_UUIDS[i]]) for i, name in enumerate(HOSTILE)])
    with watching(kubelet, config_dir) as w:
        wait_until(lambda: len(processes(load(overrides))) == len(HOSTILE), 30, "published")
        names = {i: entries[0]["name"] for i, entries in processes(load(overrides)).items()}
        assert set(names.values()) == {"ml/p\ufffd/main"}
        assert ctl.run("status").returncode == 0
        writes = w.metric("allocwatch_writes_total")  # counted before the edit: any after is one
        ctl.ok("temp", "--gpu", "7", "61")  # ctl rewrites the whole file
        after = {i: e[0]["name"] for i, e in processes(load(overrides)).items()}
        assert after == names  # its round trip keeps them
        polls = w.metric("allocwatch_polls_total")
        wait_until(lambda: w.metric("allocwatch_polls_total") > polls + 10, 30, "10 more polls")
        assert w.metric("allocwatch_writes_total") == writes  # no fix-up write
        assert w.stop() == 0, "".join(w.log)
    assert processes(load(overrides)) == {}
    assert ctl.run("status").returncode == 0
