"""1. An idle node: every device reads used 0 and free equal to its aperture."""

from __future__ import annotations

import pytest

from e2e.framework.expected import Expectation
from e2e.framework.stack import Stack


def test_idle_node_reads_used_zero_and_free_aperture(deployed: Stack, expect: Expectation) -> None:
    readings = deployed.watcher.wait_readings(expect.idle(), 10, "an idle node")
    assert sorted(readings) == [str(d.index) for d in expect.devices if d.has_memory]
    for index, memory in readings.items():
        assert memory == {"used_bytes": 0, "free_bytes": expect.aperture(int(index))}


def test_expectations_match_the_staged_profile_literally(
    deployed: Stack, expect: Expectation
) -> None:
    """Cross-check the arithmetic helper against hand-computed bytes for our profile."""
    if not deployed.settings.stage:
        pytest.skip("nvml-mock's own profile is installed, not our staged one")
    assert expect.fraction == 0.75
    # by `index:`, though the profile lists them 2, 0, 3, 1
    assert {d.uuid: d.index for d in expect.devices} == {
        "GPU-e2e0a11c-0000-4000-8000-000000000000": 0,
        "GPU-e2e0a11c-0000-4000-8000-000000000001": 1,
        "GPU-e2e0a11c-0000-4000-8000-000000000002": 2,
        "GPU-e2e0a11c-0000-4000-8000-000000000003": 3,
    }
    assert expect.idle() == {
        "0": {"used_bytes": 0, "free_bytes": 12616466432},
        "1": {"used_bytes": 0, "free_bytes": 25367150589},
        "2": {"used_bytes": 0, "free_bytes": 51002736640},
        "3": {"used_bytes": 0, "free_bytes": 102005473280},
    }
    # 25367150589 * 0.75 = 19025362941.75, truncated; two claims clamp at the aperture.
    assert expect.readings({1: 1})["1"] == {"used_bytes": 19025362941, "free_bytes": 6341787648}
    assert expect.readings({1: 2})["1"] == {"used_bytes": 25367150589, "free_bytes": 0}


def test_install_notes_count_the_nodes_the_selector_matches(deployed: Stack) -> None:
    """helm's lookup against the real API server: the chart's NOTES name the match."""
    deployed.watcher.ensure()
    nodes = len(deployed.kubectl.get("nodes")["items"])
    notes = deployed.watcher.notes
    assert f"kubernetes.io/hostname={deployed.node}" in notes, notes
    assert f"1 of the cluster's {nodes} node(s) match." in notes, notes
