"""values.schema.json rejects values of the wrong type or shape, naming the value.

Values that only become a flag are the watcher's to check: it exits 2 naming
the flag, so a value it refuses is rendered as given and refused by the
watcher's own parser (test_a_value_only_the_watcher_checks_is_refused_by_it).
"""

from __future__ import annotations

from typing import Any

import pytest

from allocwatch.flags import build_parser
from tests.chart.helmtool import Helm, container

SCHEMA_ERROR = "values don't meet the specifications of the schema"


@pytest.mark.parametrize(
    ("values", "path", "message"),
    [
        ({"usedFractionPerClaim": True}, "/usedFractionPerClaim", "want number"),
        ({"podResourcesSocket": ""}, "/podResourcesSocket", "minLength"),
        ({"podResourcesSocket": "kubelet.sock"}, "/podResourcesSocket", "does not match"),
        ({"podResourcesSocket": "/kubelet.sock"}, "/podResourcesSocket", "does not match"),
        ({"podResourcesSocket": "/var/lib/kubelet/"}, "/podResourcesSocket", "does not match"),
        ({"nvmlMockRoot": ""}, "/nvmlMockRoot", "minLength"),
        ({"nvmlMockRoot": "/"}, "/nvmlMockRoot", "does not match"),
        ({"nvmlMockRoot": "/var/lib/nvml-mock/"}, "/nvmlMockRoot", "does not match"),
        ({"resourceNames": "nvidia.com/gpu"}, "/resourceNames", "want array"),
        ({"resourceNames": []}, "/resourceNames", "minItems"),
        ({"resourceNames": [1]}, "/resourceNames/0", "want string"),
        ({"interval": True}, "/interval", "got boolean, want number or string"),
        ({"logLevel": 3}, "/logLevel", "want string"),
        ({"image": {"tag": 1.5}}, "/image/tag", "want integer or string"),
        ({"draDrivers": "gpu.nvidia.com"}, "/draDrivers", "want array"),
        ({"draDrivers": []}, "/draDrivers", "minItems"),
        ({"draDrivers": [1]}, "/draDrivers/0", "want string"),
        ({"extraArgs": "--once"}, "/extraArgs", "want array"),
        ({"extraArgs": [1]}, "/extraArgs/0", "want string"),
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


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        ({"usedFractionPerClaim": 0}, "argument --used-fraction: '0' must be in (0, 1]"),
        ({"usedFractionPerClaim": -0.1}, "argument --used-fraction: '-0.1' must be in (0, 1]"),
        ({"usedFractionPerClaim": 1.5}, "argument --used-fraction: '1.5' must be in (0, 1]"),
        ({"usedFractionPerClaim": "1.5"}, "argument --used-fraction: '1.5' must be in (0, 1]"),
        (
            {"usedFractionPerClaim": "half"},
            "argument --used-fraction: 'half' is not a decimal number",
        ),
        ({"interval": "2x"}, "argument --interval: '2x' is not a duration"),
        ({"interval": "2 s"}, "argument --interval: '2 s' is not a duration"),
        ({"interval": "-1s"}, "argument --interval: '-1s' must be between 10ms and 24h"),
        ({"interval": "0s"}, "argument --interval: '0s' must be between 10ms and 24h"),
        ({"interval": ""}, "argument --interval: empty duration"),
        ({"interval": 0}, "argument --interval: '0' must be between 10ms and 24h"),
        ({"resourceNames": ["gpu"]}, "argument --resource-name: 'gpu' is not an extended"),
        ({"logFormat": "xml"}, "argument --log-format: invalid choice: 'xml'"),
        ({"logLevel": "trace"}, "argument --log-level: invalid choice: 'trace'"),
    ],
)
def test_a_value_only_the_watcher_checks_is_refused_by_it(
    helm: Helm, values: dict[str, Any], refusal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chart passes the value on; the watcher's parser exits 2 naming flag and value."""
    args = container(helm.render(values))["args"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(args)
    assert exited.value.code == 2
    assert refusal in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "refusal"),
    [
        ("usedFractionPerClaim=0", "argument --used-fraction: '0' must be in (0, 1]"),
        ("usedFractionPerClaim=1.5", "argument --used-fraction: '1.5' must be in (0, 1]"),
        ("usedFractionPerClaim=0.0", "argument --used-fraction: '0.0' must be in (0, 1]"),
        ("interval=2x", "argument --interval: '2x' is not a duration"),
    ],
)
def test_a_set_flag_only_the_watcher_checks_is_refused_by_it(
    helm: Helm, flag: str, refusal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = container(helm.render(None, "--set", flag))["args"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(args)
    assert exited.value.code == 2
    assert refusal in capsys.readouterr().err
