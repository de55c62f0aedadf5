"""values.schema.json rejects values of the wrong type, shape, range or format, naming the value.

So `helm install` fails, not the pod. The watcher still checks every flag
itself (it exits 2 naming the flag), and the two agree on every boundary
(test_the_schema_and_the_flags_agree_on_every_boundary); where a schema line
cannot state a rule (the range of a duration written as text), the watcher's
refusal is what the user sees.
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
        ({"interval": "2x"}, "/interval", "does not match"),
        ({"interval": 0}, "/interval", "minimum"),
        ({"usedFractionPerClaim": 0}, "/usedFractionPerClaim", "exclusiveMinimum"),
        ({"usedFractionPerClaim": 1.5}, "/usedFractionPerClaim", "maximum"),
        ({"usedFractionPerClaim": "half"}, "/usedFractionPerClaim", "does not match"),
        ({"logLevel": 3}, "/logLevel", "want string"),
        ({"logLevel": "trace"}, "/logLevel", "value must be one of"),
        ({"logFormat": "xml"}, "/logFormat", "value must be one of"),
        ({"resourceNames": ["gpu"]}, "/resourceNames/0", "does not match"),
        ({"draDrivers": ["gpu.nvidia.com/x"]}, "/draDrivers/0", "does not match"),
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
        ({"activity": {"enabled": "false"}}, "/activity/enabled", "want boolean"),
        (
            {"activity": {"busyUtilization": "70 to 90"}},
            "/activity/busyUtilization",
            "does not match",
        ),
        ({"activity": {"busyUtilization": "101"}}, "/activity/busyUtilization", "does not match"),
        ({"activity": {"busyUtilization": 101}}, "/activity/busyUtilization", "maximum"),
        ({"activity": {"busy": "70-90"}}, "/activity", "additional properties 'busy'"),
        ({"declaredLoad": {"enabled": "yes"}}, "/declaredLoad/enabled", "want boolean"),
        ({"declaredLoad": True}, "/declaredLoad", "want object"),
        ({"declaredLoad": {"enable": True}}, "/declaredLoad", "additional properties 'enable'"),
        ({"processes": {"enabled": "false"}}, "/processes/enabled", "want boolean"),
        ({"processes": {"enable": False}}, "/processes", "additional properties 'enable'"),
        ({"processes": False}, "/processes", "want object"),
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
        ("usedFractionPerClaim=0", "/usedFractionPerClaim"),
        ("usedFractionPerClaim=1.5", "/usedFractionPerClaim"),
        ("usedFractionPerClaim=0.0", "/usedFractionPerClaim"),
        ("interval=2x", "/interval"),
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


# (values, whether the schema takes them, whether the watcher's flag takes what the
# chart renders of them). They differ only where one schema line cannot say it:
# a duration's range when written as text, and a band's order.
BOUNDARIES: list[tuple[dict[str, Any], bool, bool]] = [
    ({"usedFractionPerClaim": 0}, False, False),
    ({"usedFractionPerClaim": -0.1}, False, False),
    ({"usedFractionPerClaim": 0.0001}, True, True),
    ({"usedFractionPerClaim": 1}, True, True),
    ({"usedFractionPerClaim": 1.0000001}, False, False),
    ({"usedFractionPerClaim": 1.5}, False, False),
    ({"usedFractionPerClaim": "0"}, False, False),
    ({"usedFractionPerClaim": "0.0"}, False, False),
    ({"usedFractionPerClaim": ".5"}, True, True),
    ({"usedFractionPerClaim": "0.0001"}, True, True),
    ({"usedFractionPerClaim": "1"}, True, True),
    ({"usedFractionPerClaim": "1."}, True, True),
    ({"usedFractionPerClaim": "1.0"}, True, True),
    ({"usedFractionPerClaim": "1.0000001"}, False, False),
    ({"usedFractionPerClaim": "-0.5"}, False, False),
    ({"usedFractionPerClaim": "half"}, False, False),
    ({"interval": 0.01}, True, True),
    ({"interval": 0.009}, False, False),
    ({"interval": 86400}, True, True),
    ({"interval": 86401}, False, False),
    ({"interval": 0}, False, False),
    ({"interval": "10ms"}, True, True),
    ({"interval": "9ms"}, True, False),  # a text duration's range: the watcher's
    ({"interval": "24h"}, True, True),
    ({"interval": "24h1s"}, True, False),  # likewise
    ({"interval": "0.5"}, True, True),
    ({"interval": "1h2m3.5s"}, True, True),
    ({"interval": "-1s"}, False, False),
    ({"interval": "2 s"}, False, False),
    ({"interval": "2x"}, False, False),
    ({"interval": ""}, False, False),
    ({"logFormat": "json"}, True, True),
    ({"logFormat": "xml"}, False, False),
    ({"logLevel": "warning"}, True, True),
    ({"logLevel": "trace"}, False, False),
    ({"logLevel": "INFO"}, False, False),
    ({"resourceNames": ["example.com/gpu"]}, True, True),
    ({"resourceNames": ["gpu"]}, False, False),
    ({"resourceNames": ["/gpu"]}, False, False),
    ({"resourceNames": ["example.com/"]}, False, False),
    ({"draDrivers": ["gpu.example.com"]}, True, True),
    ({"draDrivers": ["gpu.example.com/x"]}, False, False),
    ({"draDrivers": [""]}, False, False),
    ({"activity": {"busyUtilization": "0"}}, True, True),
    ({"activity": {"busyUtilization": "100"}}, True, True),
    ({"activity": {"busyUtilization": "101"}}, False, False),
    ({"activity": {"busyUtilization": "60-90"}}, True, True),
    ({"activity": {"busyUtilization": "90-60"}}, True, False),  # a band upside down: the watcher's
    ({"activity": {"busyUtilization": "-5"}}, False, False),
    ({"activity": {"busyUtilization": 100}}, True, True),
    ({"activity": {"busyUtilization": 101}}, False, False),
]


@pytest.mark.parametrize(("values", "schema_takes", "flag_takes"), BOUNDARIES)
def test_the_schema_and_the_flags_agree_on_every_boundary(
    helm: Helm,
    values: dict[str, Any],
    schema_takes: bool,
    flag_takes: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = helm.template(values)
    assert (result.returncode == 0) is schema_takes, result.stderr
    if not schema_takes:
        assert SCHEMA_ERROR in result.stderr
    args = container(helm.render(values, "--skip-schema-validation"))["args"]
    try:
        build_parser().parse_args(args)
        taken = True
    except SystemExit as exited:
        assert exited.code == 2
        taken = False
    assert taken is flag_takes, capsys.readouterr().err
