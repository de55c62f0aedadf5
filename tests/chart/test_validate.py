"""Rendered manifests pass strict Kubernetes schemas; `helm lint --strict` is clean."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.helmtool import CHART, SCENARIOS, Helm, container, only

# kubernetes-validate bundles core Kubernetes schemas only, not CRDs.
NOT_IN_CORE_SCHEMAS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def claimed_floor() -> str:
    """The chart's kubeVersion floor, e.g. ">=1.28.0-0" -> "1.28.0"."""
    constraint = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)\.(\d+)(-0)?", constraint)
    assert m, f"unexpected kubeVersion {constraint!r}"
    return f"{m[1]}.{m[2]}.{m[3]}"


OLDEST = claimed_floor()
NEWEST = kubernetes_validate.latest_version()
VERSIONS = [OLDEST, NEWEST]

SCENARIO_NAMES = [path.name.removesuffix("-values.yaml") for path in SCENARIOS]


def validate_all(objects: list[dict[str, Any]], version: str) -> list[str]:
    checked = []
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in NOT_IN_CORE_SCHEMAS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)
        checked.append(obj["kind"])
    return checked


def test_versions_are_bundled() -> None:
    bundled = set(kubernetes_validate.utils.all_versions())
    assert OLDEST in bundled, f"kubernetes-validate has no schemas for {OLDEST}"
    assert NEWEST in bundled
    assert OLDEST != NEWEST


def test_the_scenarios_cover_the_optional_objects() -> None:
    names = set(SCENARIO_NAMES)
    assert {"default", "metrics-on", "metrics-off", "everything"} <= names, names


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_NAMES)
def test_manifests_validate_strictly(helm: Helm, scenario: Path, version: str) -> None:
    objects = helm.render(None, "-f", str(scenario), kube_version=f"v{version}")
    checked = validate_all(objects, version)
    assert "DaemonSet" in checked
    if scenario.name == "metrics-on-values.yaml":
        assert checked == ["Service", "DaemonSet"]


def test_strict_validation_catches_a_bad_field(helm: Helm) -> None:
    """Guards against a vacuous pass: an unknown field must fail strict validation."""
    objects = helm.render()
    bad = copy.deepcopy(objects)
    container(bad)["imagePullPolicyX"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_all(bad, NEWEST)
    typo = copy.deepcopy(objects)
    only(typo, "DaemonSet")["spec"]["template"]["spec"]["automountServiceAccountToken"] = "no"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_all(typo, OLDEST)


def test_kube_version_below_the_floor_is_refused(helm: Helm) -> None:
    major, minor, _ = OLDEST.split(".")
    result = helm.template(None, kube_version=f"v{major}.{int(minor) - 1}.0")
    assert result.returncode != 0
    assert "kubeVersion" in result.stderr or "incompatible" in result.stderr, result.stderr


@pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_NAMES)
def test_helm_lint_strict(helm: Helm, scenario: Path) -> None:
    result = helm.run("lint", "--strict", str(CHART), "-f", str(scenario))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout
    assert "[ERROR]" not in result.stdout
    assert "0 chart(s) failed" in result.stdout
