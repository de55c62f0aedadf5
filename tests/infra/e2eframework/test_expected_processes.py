"""The e2e's own derivation of the processes and the activity agrees with the watcher's."""

from __future__ import annotations

from allocwatch.claims import Claim
from allocwatch.ownedkeys import ACTIVITY, publication
from allocwatch.processes import PidTable
from allocwatch.profile import Device
from allocwatch.profilesource import load_devices
from allocwatch.readings import Settings, read
from e2e.framework.expected import Expectation
from e2e.framework.expected import process_lists as document_lists
from tests.conftest import A100_UUIDS
from tests.support import REPO_ROOT


def test_expected_processes_are_what_the_watcher_publishes(a100: list[Device]) -> None:
    pods = {"a": [A100_UUIDS[0]], "b": [A100_UUIDS[0], A100_UUIDS[3]], "c": [A100_UUIDS[3]]}
    claims = [
        Claim("e2e", pod, "main", "nvidia.com/gpu", uuid)
        for pod, uuids in pods.items()
        for uuid in uuids
    ]
    readings = read(a100, claims, Settings(fraction=0.75), PidTable())
    expect = Expectation(a100, 0.75)
    want = expect.processes("e2e", pods, "nvidia.com/gpu", "main")
    ours = {str(i): r.processes for i, r in readings.devices.items() if r.processes}
    assert want == ours
    assert sorted(want) == ["0", "3"] and len(want["0"]) == 2
    activity = expect.activity(expect.claims_for([c.device_id for c in claims]))
    published = publication(readings.devices, ACTIVITY)
    assert activity == {
        str(i): {key[-1]: value for key, value in keys.items()} for i, keys in published.items()
    }


def test_process_lists_of_a_document() -> None:
    doc = {"devices": {"0": {"processes": [{"pid": 1}]}, "1": {"memory": {}}}}
    assert document_lists(doc) == {"0": [{"pid": 1}]}
    assert document_lists(None) == {}


def test_expected_activity_is_what_the_watcher_publishes_on_the_e2e_profile() -> None:
    devices = load_devices(REPO_ROOT / "e2e" / "profiles" / "four-gpus.yaml")
    expect = Expectation(devices, 0.5)
    for counts in ({}, {0: 1}, {1: 2, 2: 1}, {2: 3, 3: 1}):
        claims = [
            Claim("e2e", f"p{d}-{n}", "main", "nvidia.com/gpu", f"{devices[d].uuid}::{n}")
            for d, many in counts.items()
            for n in range(many)
        ]
        readings = read(devices, claims, Settings(), PidTable())
        published = publication(readings.devices, ACTIVITY)
        ours = {str(i): {k[-1]: v for k, v in keys.items()} for i, keys in published.items()}
        assert expect.activity(counts) == ours, counts
