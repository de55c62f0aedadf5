"""values.schema.json rejects bad values with a message naming the value."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.helmtool import Helm

SCHEMA_ERROR = "values don't meet the specifications of the schema"


@pytest.mark.parametrize(
    ("values", "path", "message"),
    [
        ({"usedFractionPerClaim": 0}, "/usedFractionPerClaim", "exclusiveMinimum"),
        ({"usedFractionPerClaim": -0.1}, "/usedFractionPerClaim", "exclusiveMinimum"),
        ({"usedFractionPerClaim": 1.5}, "/usedFractionPerClaim", "maximum"),
        ({"usedFractionPerClaim": "1.5"}, "/usedFractionPerClaim", "does not match pattern"),
        ({"usedFractionPerClaim": "half"}, "/usedFractionPerClaim", "does not match pattern"),
        ({"usedFractionPerClaim": True}, "/usedFractionPerClaim", "want number"),
        ({"interval": "2x"}, "/interval", "does not match pattern"),
        ({"interval": "2 s"}, "/interval", "does not match pattern"),
        ({"interval": "-1s"}, "/interval", "does not match pattern"),
        ({"interval": "0s"}, "/interval", "does not match pattern '[1-9]'"),
        ({"interval": ""}, "/interval", "does not match pattern"),
        ({"interval": 0}, "/interval", "exclusiveMinimum"),
        ({"podResourcesSocket": ""}, "/podResourcesSocket", "minLength"),
        ({"podResourcesSocket": "kubelet.sock"}, "/podResourcesSocket", "does not match"),
        ({"podResourcesSocket": "/kubelet.sock"}, "/podResourcesSocket", "does not match"),
        ({"podResourcesSocket": "/var/lib/kubelet/"}, "/podResourcesSocket", "does not match"),
        ({"nvmlMockRoot": ""}, "/nvmlMockRoot", "minLength"),
        ({"nvmlMockRoot": "/"}, "/nvmlMockRoot", "does not match"),
        ({"nvmlMockRoot": "/var/lib/nvml-mock/"}, "/nvmlMockRoot", "does not match"),
        ({"resourceNames": "nvidia.com/gpu"}, "/resourceNames", "want array"),
        ({"resourceNames": []}, "/resourceNames", "minItems"),
        ({"resourceNames": ["gpu"]}, "/resourceNames/0", "does not match"),
        ({"draDrivers": "gpu.nvidia.com"}, "/draDrivers", "want array"),
        ({"draDrivers": []}, "/draDrivers", "minItems"),
        ({"draDrivers": ["nvidia.com/gpu"]}, "/draDrivers/0", "does not match"),
        ({"draDrivers": ["GPU.nvidia.com"]}, "/draDrivers/0", "does not match"),
        ({"extraArgs": "--once"}, "/extraArgs", "want array"),
        ({"extraArgs": [1]}, "/extraArgs/0", "want string"),
        ({"logFormat": "xml"}, "/logFormat", "value must be one of"),
        ({"logLevel": "trace"}, "/logLevel", "value must be one of"),
        ({"metrics": {"port": 0}}, "/metrics/port", "minimum"),
        (
            {"metrics": {"serviceMonitor": {"interval": "30"}}},
            "/metrics/serviceMonitor/interval",
            "does not match",
        ),
        ({"image": {"digest": "latest"}}, "/image/digest", "does not match"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy", "value must be one of"),
        ({"terminationGracePeriodSeconds": 0}, "/terminationGracePeriodSeconds", "minimum"),
        ({"readinessProbe": {"httpGet": {"path": "/"}}}, "/readinessProbe", "httpGet"),
        # The API server refuses any other successThreshold for these two.
        (
            {"livenessProbe": {"successThreshold": 2}},
            "/livenessProbe/successThreshold",
            "must be 1",
        ),
        ({"startupProbe": {"successThreshold": 2}}, "/startupProbe/successThreshold", "must be 1"),
        ({"intervall": "2s"}, "", "additional properties 'intervall' not allowed"),
    ],
)
def test_schema_rejects(helm: Helm, values: dict[str, Any], path: str, message: str) -> None:
    result = helm.template(values)
    assert result.returncode != 0, f"accepted {values}"
    assert SCHEMA_ERROR in result.stderr
    assert f"at '{path}'" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("flag", "path"),
    [
        ("usedFractionPerClaim=0", "/usedFractionPerClaim"),
        ("usedFractionPerClaim=1.5", "/usedFractionPerClaim"),
        ("usedFractionPerClaim=0.0", "/usedFractionPerClaim"),
        ("interval=2x", "/interval"),
        ("podResourcesSocket=", "/podResourcesSocket"),
        ("resourceNames=nvidia.com/gpu", "/resourceNames"),
    ],
)
def test_schema_rejects_set_flags(helm: Helm, flag: str, path: str) -> None:
    result = helm.template(None, "--set", flag)
    assert result.returncode != 0
    assert f"at '{path}'" in result.stderr, result.stderr


@pytest.mark.parametrize(
    "values",
    [
        {"interval": "500ms"},
        {"interval": "1h2m3.5s"},
        {"interval": "15000us"},
        {"interval": ".5s"},
        {"interval": "0.5"},
        {"interval": 2},
        {"usedFractionPerClaim": 1},
        {"usedFractionPerClaim": 0.001},
        {"usedFractionPerClaim": "0.25"},
        {"usedFractionPerClaim": "1.0"},
        {"global": {"imageRegistry": "x"}},
    ],
)
def test_schema_accepts(helm: Helm, values: dict[str, Any]) -> None:
    result = helm.template(values)
    assert result.returncode == 0, result.stderr
