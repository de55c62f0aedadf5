"""The e2e's own derivation of the processes agrees with the watcher's."""

from __future__ import annotations

from allocwatch.claims import Claim
from allocwatch.processes import PidTable, process_lists
from allocwatch.profile import Device
from allocwatch.reconcile import reconcile
from e2e.framework.expected import Expectation
from e2e.framework.expected import process_lists as document_lists
from tests.conftest import A100_UUIDS


def test_expected_processes_are_what_the_watcher_publishes(a100: list[Device]) -> None:
    pods = {"a": [A100_UUIDS[0]], "b": [A100_UUIDS[0], A100_UUIDS[3]], "c": [A100_UUIDS[3]]}
    claims = [
        Claim("e2e", pod, "main", "nvidia.com/gpu", uuid)
        for pod, uuids in pods.items()
        for uuid in uuids
    ]
    ours = process_lists(reconcile(a100, claims, 0.75), PidTable()).lists
    want = Expectation(a100, 0.75).processes("e2e", pods, "nvidia.com/gpu", "main")
    assert want == {str(index): entries for index, entries in ours.items()}
    assert sorted(want) == ["0", "3"] and len(want["0"]) == 2


def test_process_lists_of_a_document() -> None:
    doc = {"devices": {"0": {"processes": [{"pid": 1}]}, "1": {"memory": {}}}}
    assert document_lists(doc) == {"0": [{"pid": 1}]}
    assert document_lists(None) == {}
