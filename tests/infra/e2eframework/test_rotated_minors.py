"""The DRA variant's profile: nvml-mock's own t4 with every minor number moved one up."""

from __future__ import annotations

import tarfile

import pytest
import yaml

from e2e.framework.realdra import rotated_minors
from tests.infra.realstack.test_nvml_mock_values import TARBALL

T4_IN_TARBALL = "/deployments/nvml-mock/helm/nvml-mock/profiles/t4.yaml"


@pytest.fixture(scope="module")
def t4() -> str:
    if not TARBALL.is_file():
        pytest.fail(f"{TARBALL} is missing: the pinned upstream tarball sits beside the repository")
    with tarfile.open(TARBALL) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.endswith(T4_IN_TARBALL)]
        f = tar.extractfile(member)
        assert f is not None
        return f.read().decode()


def test_no_gpu_keeps_its_index_as_minor_number(t4: str) -> None:
    devices = yaml.safe_load(rotated_minors(t4))["devices"]
    assert [(d["index"], d["minor_number"]) for d in devices] == [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_nothing_else_changes(t4: str) -> None:
    before, after = yaml.safe_load(t4), yaml.safe_load(rotated_minors(t4))
    for device in before["devices"] + after["devices"]:
        del device["minor_number"]
    assert before == after
    # the comments stay too: only the four numbers differ
    lines = zip(t4.splitlines(), rotated_minors(t4).splitlines(), strict=True)
    changed = [(a, b) for a, b in lines if a != b]
    assert len(changed) == 4, changed


@pytest.mark.parametrize("minors", [[], [0, 2], [1, 0]], ids=["none", "a gap", "out of order"])
def test_a_profile_whose_minors_are_not_its_indices_is_refused(minors: list[int]) -> None:
    profile = "devices:\n" + "".join(
        f"  - index: {i}\n    minor_number: {m}\n" for i, m in enumerate(minors)
    )
    with pytest.raises(ValueError, match=r"expected minor numbers 0\.\.N-1"):
        rotated_minors(profile)
